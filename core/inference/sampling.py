"""Sampling: each next token drawn from the model's distribution, sharpened by a temperature and
cut to the top-k tokens (Fan et al. 2018) and/or the top-p nucleus (Holtzman et al. 2020), on the
same batched step machinery as greedy decoding (core.inference.greedy.decode_rows). The paper decodes with
beam search only (section 6.1); sampling shows the distribution that beam search ranks.
"""
from __future__ import annotations

from typing import Any

import torch

from ..model.transformer import Transformer
from .greedy import decode_rows
from .options import DecodeOptions, resolve_options
from .step_rules import NEG_INF
from .steps import Hypothesis, Sources, count_sources


def sample(model: Transformer, src: Sources, max_len: torch.Tensor | int,
           options: DecodeOptions | None = None, generator: torch.Generator | None = None,
           prefix: torch.Tensor | None = None, **overrides: Any) -> list[Hypothesis | None]:
    """Draw each token from the model's distribution sharpened by temperature and cut to the
    top_k tokens and/or the top_p nucleus; generator (default: seeded from options.seed) makes
    it repeatable. token_logprobs and score are the model's own log-probabilities. None as in
    greedy_decode; prefix as in beam_search (a forced token is the only one its row can draw)."""
    opts = resolve_options(options, overrides)
    gen = generator or make_generator(opts, count_sources(src)[1])

    def choose(log_probs: torch.Tensor) -> torch.Tensor:
        top = log_probs.amax(dim=1, keepdim=True)
        # Shifted so the best token is 0 before dividing: a tiny temperature then sends the others
        # to -inf instead of overflowing every entry. A row with nothing allowed (max -inf) draws
        # from zeros; decode_rows ends it without a hypothesis. A temperature below float32's range
        # would round to 0 (0/0 at the best token): the smallest normal float32 samples the same way.
        temperature = max(opts.temperature, torch.finfo(log_probs.dtype).tiny)
        logits = torch.where(top.isneginf(), 0.0, (log_probs - top) / temperature)
        logits = filter_logits(logits, opts.top_k, opts.top_p)
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=gen).squeeze(1)

    return decode_rows(model, src, max_len, opts, choose, prefix)


def make_generator(options: DecodeOptions, device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    if options.seed is None:
        gen.seed()
    else:
        gen.manual_seed(options.seed)
    return gen


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Keep the top_k largest logits (0: all; exactly k, ties broken by torch.topk), then the
    smallest set whose probability reaches top_p."""
    if top_k:
        top = logits.topk(min(top_k, logits.size(1)), dim=1).indices
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, top, True)
        logits = logits.masked_fill(~keep, NEG_INF)
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=1, descending=True)
        probs = sorted_logits.softmax(dim=1)
        outside = probs.cumsum(dim=1) - probs >= top_p  # the mass before it already reaches top_p
        logits = logits.masked_fill(torch.zeros_like(outside).scatter(1, order, outside), NEG_INF)
    return logits
