"""Section 5.4, residual dropout: "we apply dropout to the output of each sub-layer, before it
is added to the sub-layer input and normalized ... and to the sums of the embeddings and the
positional encodings", with P_drop = 0.1 for the base model.

The same function as ``nn.Dropout``: in training each element is zeroed with probability p and
the survivors are scaled by 1 / (1 - p); in eval mode it is the identity. Only the random mask
is made differently on the CPU. torch's CPU ``bernoulli_`` samples each element on its own, and
slowly: at seed 000's shapes it was a quarter of a training step's time outside matrix
products. Here each element's mask comes from 16 random bits, four elements per 64-bit draw,
about three times as fast: an element is kept when its bits, read as a signed integer, reach
the threshold that leaves probability p below it. p is thereby rounded to a multiple of 2^-16
(0.1 becomes 0.100006), far below what training can tell apart. On GPUs, and under
torch.compile, the native kernel is used.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_LEVELS = 2 ** 16
_PER_DRAW = 4  # 16-bit pieces of one 64-bit draw


def keep_mask(shape: torch.Size, p: float) -> torch.Tensor:
    """A bool tensor of `shape` on the CPU, each element True with probability 1 - p."""
    n = shape.numel()
    bits = torch.empty(-(-n // _PER_DRAW), dtype=torch.int64).random_(-2 ** 63, None)
    # int16 values below the threshold have probability p (p rounded to a multiple of 2^-16).
    threshold = min(round(p * _LEVELS), _LEVELS - 1) - _LEVELS // 2
    return bits.view(torch.int16)[:n].view(shape) >= threshold


class Dropout(nn.Module):
    """Dropout with probability p (0 <= p < 1), the cheaper mask on the CPU."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p!r}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu" or torch.compiler.is_compiling():
            return F.dropout(x, self.p, training=True)
        # The scale rides on the mask, so forward and backward are one multiply each (torch.where
        # takes two). The factor is at least fp32 and the product is rounded once in x's dtype:
        # in bf16 a rounded scale would be off by 0.2%.
        factor = keep_mask(x.shape, self.p).to(torch.promote_types(x.dtype, torch.float32))
        return (x * factor.mul_(1.0 / (1.0 - self.p))).to(x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"
