"""A tiny Transformer and random right-padded token batches, for the model's tests."""
from __future__ import annotations

import torch

from core import ModelConfig, Transformer

V = 40


def tiny(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V, max_len=64, **overrides)
    return Transformer(config).eval()


def batch(lengths: list[int], seed: int = 0) -> torch.Tensor:
    """Right-padded random token ids (ids 4.. are ordinary tokens)."""
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, n in enumerate(lengths):
        out[row, :n] = torch.randint(4, V, (n,), generator=g)
    return out
