"""What every search's steps share. The decoder is auto-regressive (section 3): each step feeds one new
token per hypothesis, attending to the earlier ones through the key/value cache (core/model/cache.py).
Here: inference mode, the sources a search reads, the token a row feeds next (bos first), a cache copy
a step may extend, and the Hypothesis a search returns.
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from ..model.cache import DecoderCache
from ..model.transformer import Transformer

Sources = torch.Tensor | Sequence[torch.Tensor]  # (B, S) ids, or groups of them (Transformer.start_decoding)


@dataclass(frozen=True)
class Hypothesis:
    """One output of the tensor-level decoders."""

    ids: list[int]               # generated ids, ending with eos
    token_logprobs: list[float]  # the model's log-probability of each id (eos included)
    logprob: float               # their sum, log P(Y | X)
    score: float                 # beam: logprob / lp(|Y|); greedy and sampling: logprob


@contextlib.contextmanager
def inference(model: Transformer) -> Iterator[None]:
    """Eval mode and torch.inference_mode() inside the block; the model's mode is restored."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def count_sources(src: Sources) -> tuple[int, torch.device]:
    """How many sources src holds, and their device."""
    groups = [src] if isinstance(src, torch.Tensor) else src
    if not groups:
        raise ValueError("no source sentences to decode")
    return sum(group.size(0) for group in groups), groups[0].device


def last_tokens(model: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    """The token each row (R, t) feeds the decoder next: its newest, or bos before the first step."""
    if tokens.size(1):
        return tokens[:, -1]
    return torch.full((tokens.size(0),), model.config.bos_id, dtype=torch.long, device=tokens.device)


def copy_cache(cache: DecoderCache) -> DecoderCache:
    """A cache the next decode_step may extend without touching the original (tensors are shared)."""
    return dataclasses.replace(cache, self_kv=list(cache.self_kv))
