"""Section 3.5: the positions added to the embeddings.

Sinusoidal encodings, computed for every position:

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

or learned positional embeddings, a trained table: "We also experimented with using learned
positional embeddings instead, and found that the two versions produced nearly identical results"
(Table 3, row E). The paper chose the sinusoids because they "may allow the model to extrapolate to
sequence lengths longer than the ones encountered during training"; a learned table has no row past
its max_len, so a model with one can never read or write a longer sequence.
"""
from __future__ import annotations

import math

import torch
from torch import nn


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


class Positions(nn.Module):
    """The positions of a model that reads at most max_len tokens: positions(offset, length) is the
    (length, d_model) block for positions offset .. offset + length - 1. offset may be a (1,) tensor (the
    compiled decoding step's, core/inference/compiled.py: read on the device, one graph for every step)."""

    def __init__(self, kind: str, max_len: int, d_model: int):
        super().__init__()
        self.kind = kind
        if kind == "learned":
            # Initialised with the model's other matrices (Xavier, transformer.py); trained like the embeddings.
            self.table = nn.Parameter(torch.empty(max_len, d_model))
        elif kind == "sinusoidal":
            # Not saved: computed again on load, for whatever max_len the config asks.
            self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)
        else:
            raise ValueError(f"unknown positional encoding {kind!r}; allowed: sinusoidal, learned")

    def forward(self, offset: int | torch.Tensor, length: int) -> torch.Tensor:
        if isinstance(offset, torch.Tensor):
            return self.table.index_select(0, offset + torch.arange(length, device=offset.device))
        return self.table[offset:offset + length]
