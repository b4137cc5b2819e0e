"""Greedy decoding: the most probable token at each step (the paper decodes with beam search, section
6.1; greedy is its cheapest stand-in), batched over sentences on the decoder's key/value cache under the rules of
step_rules.py; finished rows leave the batch. decode_rows, its loop with the choice of token left open,
serves sampling too (sampling.py).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..model.transformer import Transformer
from . import ranking
from .options import DecodeOptions, resolve_options
from .step_rules import check_prefix, constrain, forced_at, output_lengths
from .steps import Hypothesis, Sources, count_sources, inference, last_tokens


def greedy_decode(model: Transformer, src: Sources, max_len: torch.Tensor | int,
                  options: DecodeOptions | None = None, prefix: torch.Tensor | None = None,
                  **overrides: Any) -> list[Hypothesis | None]:
    """The most probable token at each step, for every source in src (B, S), or in its groups;
    score = log P(Y|X). prefix as in beam_search.
    Uses options.min_len and no_repeat_ngram (None for a row they leave no token to choose)."""
    opts = resolve_options(options, overrides)
    return decode_rows(model, src, max_len, opts, ranking.argmax, prefix)


def decode_rows(model: Transformer, src: Sources, max_len: torch.Tensor | int, options: DecodeOptions,
                choose: Callable[[torch.Tensor], torch.Tensor],
                prefix: torch.Tensor | None = None) -> list[Hypothesis | None]:
    """One hypothesis per row, choose() picking each next token (the prefix's while it lasts);
    finished rows leave the batch. None for a row whose every continuation became forbidden (e.g.
    no_repeat_ngram on a tiny vocabulary): its chosen token has log-probability -inf."""
    eos = model.config.eos_id
    n, device = count_sources(src)
    results: list[Hypothesis | None] = [None] * n
    with inference(model):
        max_out = output_lengths(src, max_len, model)
        check_prefix(model, prefix, max_out)
        cache = model.start_decoding(src)
        rows = list(range(n))
        tokens = torch.empty((n, 0), dtype=torch.long, device=device)
        token_lp = torch.empty((n, 0), device=device)
        while rows:
            log_probs = model.decode_step(last_tokens(model, tokens), cache)
            log_probs = constrain(model, log_probs, tokens, max_out, options, forced_at(prefix, tokens.size(1)))
            chosen = choose(log_probs)
            tokens = torch.cat([tokens, chosen[:, None]], dim=1)
            chosen_lp = log_probs.gather(1, chosen[:, None])
            token_lp = torch.cat([token_lp, chosen_lp], dim=1)
            stuck = chosen_lp.squeeze(1).isneginf()
            ended = (chosen == eos) | stuck
            if not bool(ended.any()):
                continue
            for i in ended.nonzero().squeeze(1).tolist():
                if not stuck[i]:
                    lps = token_lp[i].tolist()
                    results[rows[i]] = Hypothesis(tokens[i].tolist(), lps, math.fsum(lps), math.fsum(lps))
            keep = (~ended).nonzero().squeeze(1)
            cache, tokens, token_lp, max_out = cache.select(keep), tokens[keep], token_lp[keep], max_out[keep]
            prefix = None if prefix is None else prefix[keep]
            rows = [rows[i] for i in keep.tolist()]
    return results
