"""Real tokens only. A batch is padded to its longest sentence, but everything in the model
except attention treats each position on its own (the projections, the feed-forward network of
section 3.3, LayerNorm, dropout, the residual adds). Those run on the real tokens packed as the
rows of one (N, d) matrix; attention, which mixes positions, gets the (B, T) grid back.
With Multi30k-like lengths this skips about a third of the work of a training step."""
from __future__ import annotations

import torch


class Packing:
    """Where the real tokens of a (B, T) batch sit, to move tensors between the (B, T, ...)
    grid and (N, ...) rows of real tokens in row-major order."""

    def __init__(self, padding: torch.Tensor):
        self.batch, self.length = padding.shape
        flat = padding.flatten()
        self.index = (~flat).nonzero().squeeze(1)
        self.padding_index = flat.nonzero().squeeze(1)

    @classmethod
    def of(cls, padding: torch.Tensor) -> "Packing | None":
        """A Packing for the (B, T) bool padding mask (True at padding), None if nothing is padded."""
        return cls(padding) if bool(padding.any()) else None

    def pack(self, grid: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...)"""
        return grid.flatten(0, 1).index_select(0, self.index)

    def unpack(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...), zeros at the padding (finite values, so that masked keys
        and unused queries cannot turn attention's sums into NaN)."""
        grid = rows.new_empty(self.batch * self.length, *rows.shape[1:])
        grid.index_fill_(0, self.padding_index, 0).index_copy_(0, self.index, rows)
        return grid.view(self.batch, self.length, *rows.shape[1:])
