"""What incremental decoding keeps between steps (the decoder of section 3.1 run one token at a
time): each decoder layer's self-attention keys/values so far, and the encoder's cross-attention
keys/values, computed once per source. Beam search keeps, drops and reorders rows every step;
this module does that bookkeeping so that transformer.py reads like the paper.

Step-by-step decoding only: a whole target (training, teacher forcing, scoring) goes through the decoder
at once, its positions ordered by the causal mask, and never builds a cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

KeyValue = tuple[torch.Tensor, torch.Tensor]  # attention keys and values, (B, h, T, d_k) each


class Past(Protocol):
    """What a decoding step's self-attention continues: the keys and values of the earlier positions, kept
    as the eager cache keeps them (GrowingPast) or in the compiled step's static buffers
    (core/inference/compiled.py)."""

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """This step's keys and values (B, h, T, d_k) after the earlier positions': (keys, values, written),
        written (keys,) bool, True at the keys held so far, or None where every key is."""


class GrowingPast(NamedTuple):
    """The eager cache's past for one layer: the earlier positions' keys/values (None before the first
    step), grown by each step's; rows: which of their rows the decoder's rows continue (None: the same
    rows), e.g. after beam search reordered its hypotheses."""

    kv: KeyValue | None
    rows: torch.Tensor | None = None

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        if self.kv is None:
            return k, v, None
        return _append(self.kv[0], k, self.rows), _append(self.kv[1], v, self.rows), None


def _append(past: torch.Tensor, new: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """torch.cat([past[rows], new], dim=2) for (B, h, T, d_k) keys or values, copying past once."""
    if rows is None:
        return torch.cat([past, new], dim=2)
    out = new.new_empty(rows.size(0), past.size(1), past.size(2) + new.size(2), past.size(3))
    torch.index_select(past, 0, rows, out=out[:, :, :past.size(2)])
    out[:, :, past.size(2):] = new
    return out


class Memory(NamedTuple):
    """Encoded sources as cross-attention reads them: one group of B' sources padded to S tokens.
    Decoding may hold several groups (sources of different lengths, each padded only to its own
    longest) so that no query scores keys padded to another group's length."""

    k: torch.Tensor        # (B', h, S, d_k)
    v: torch.Tensor        # (B', h, S, d_k)
    padding: torch.Tensor  # (B', S) bool, True at padding

    @property
    def sources(self) -> int:
        return self.k.size(0)

    def select(self, index: torch.Tensor) -> "Memory":
        return Memory(*(t.index_select(0, index) for t in self))


@dataclass
class DecoderCache:
    """State for incremental decoding: the encoder's cross-attention keys/values
    (computed once) and each decoder layer's self-attention keys/values so far.

    The decoder has B rows, the encoder B' = B / G: G consecutive decoder rows (a sentence's
    beam hypotheses) share one source, whose keys/values are stored once. The sources may lie
    in several groups, each padded to its own length (Transformer.start_decoding)."""

    memory: list[list[Memory]]  # per decoder layer, the groups of sources in row order
    self_kv: list[KeyValue | None]
    length: int = 0  # target tokens consumed so far
    # Which rows of self_kv the decoder's rows are now (None: all, in order). Beam search
    # reorders rows every step; the next step applies it while appending its keys/values,
    # one copy of the cache instead of two.
    self_rows: torch.Tensor | None = None

    def select(self, rows: torch.Tensor, sources: torch.Tensor | None = None) -> "DecoderCache":
        """Keep/reorder decoder rows; the sources they now belong to are `sources` (default:
        `rows`, for one row per source), e.g. beam search dropping finished sentences. Sources are
        numbered across the groups in order; with several groups they must stay in increasing order."""
        sources = rows if sources is None else sources
        plan = plan_selection([group.sources for group in self.memory[0]], sources)
        memory = [[group if index is None else group.select(index) for group, index in zip(layer, plan) if
                   index is None or index.numel()] for layer in self.memory]
        return DecoderCache(memory, list(self.self_kv), self.length, self._rows(rows))

    def past(self) -> list[GrowingPast]:
        """Per decoder layer, what the next step's self-attention continues."""
        return [GrowingPast(kv, self.self_rows) for kv in self.self_kv]

    def reorder_hypotheses(self, rows: torch.Tensor) -> None:
        """In place: decoder rows become `rows`, each staying with its source (beam search
        re-ranking a sentence's hypotheses, or widening 1 to K of them). Sources are untouched."""
        self.self_rows = self._rows(rows)

    def _rows(self, rows: torch.Tensor) -> torch.Tensor:
        return rows if self.self_rows is None else self.self_rows.index_select(0, rows)


def plan_selection(sizes: list[int], sources: torch.Tensor) -> list[torch.Tensor | None]:
    """Which sources each group keeps (indices within the group; None: all of them, untouched),
    for `sources` indexing the groups' sources in order. Several groups keep their order, so
    `sources` must then be increasing; one group may be reordered freely."""
    total = sum(sizes)
    if sources.numel() and not (0 <= int(sources.min()) and int(sources.max()) < total):
        raise IndexError(f"DecoderCache.select: sources must lie in 0..{total - 1}; got {sources.tolist()}")
    increasing = bool((sources[1:] > sources[:-1]).all())
    if not increasing:
        if len(sizes) > 1:
            raise ValueError("DecoderCache.select: with several groups of sources, the kept sources "
                             "must be in increasing order")
        return [sources]
    ends = torch.tensor(sizes, device=sources.device).cumsum(0)
    cuts = [0] + torch.searchsorted(sources, ends).tolist()
    plan: list[torch.Tensor | None] = []
    for size, start, lo, hi in zip(sizes, [0] + ends.tolist(), cuts, cuts[1:]):
        plan.append(None if hi - lo == size else sources[lo:hi] - start)
    return plan
