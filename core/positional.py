"""Section 3.5: sinusoidal positional encodings.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))
"""
from __future__ import annotations

import math

import torch


def sinusoidal_encoding(length: int, d_model: int) -> torch.Tensor:
    """The (length, d_model) table of section 3.5; even columns sin, odd columns cos."""
    return encoding_at(torch.arange(length, dtype=torch.float64), d_model).float()


def encoding_at(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """The same formulas at any positions (N,), whole or not -> (N, d_model) in float64. The model
    reads whole positions only; a plot draws each sinusoid between them."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even (sin and cos columns come in pairs); got {d_model}")
    position = positions.to(torch.float64).unsqueeze(1)
    # 1 / 10000^(2i/d_model), computed in log space for accuracy.
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(len(positions), d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table
