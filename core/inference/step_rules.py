"""The rules every search applies at each step. Section 6.1: "we used beam search with a beam size of 4
and length penalty α = 0.6 ... We set the maximum output length during inference to input length + 50,
but terminate early when possible." The length penalty is GNMT's (Wu et al. 2016, section 7):

    lp(Y) = (5 + |Y|)^α / (5 + 1)^α,        score(Y) = log P(Y | X) / lp(Y)

(without GNMT's coverage penalty); ``length_penalty="plain"`` divides by |Y|^α instead.

Conventions (shared with the searches, the studio and the CLI):
- source ids are ``tokenizer.encode(text) + [eos]``, right-padded with pad (core.inference.translation
  prepares them from text);
- |Y| counts the generated tokens including eos;
- the maximum output length is a·|source| + b tokens including eos, |source| counting the
  source's eos (the paper: a = 1, b = 50), clamped to the model's max_len - 1 (the target with
  its bos must fit in max_len); at that length eos is forced, so every hypothesis ends in eos;
- pad and bos are never generated; ``min_len`` forbids eos before that many tokens;
  ``no_repeat_ngram`` = n forbids any n-gram to occur twice in an output;
- a given prefix's tokens are forced first (core/inference/prefix.py), at the model's own log-probabilities.
"""
from __future__ import annotations

import torch

from ..model.transformer import Transformer
from .options import DecodeOptions
from .steps import Sources, count_sources

NEG_INF = float("-inf")  # a forbidden token's log-probability


def length_penalty(length: int, options: DecodeOptions) -> float:
    """lp(|Y|) that a finished hypothesis's log-probability is divided by."""
    if options.length_penalty == "gnmt":
        return ((5 + length) / 6) ** options.alpha
    return length ** options.alpha


def output_lengths(src: Sources, max_len: torch.Tensor | int, model: Transformer) -> torch.Tensor:
    """Per-row maximum output length as a (B,) tensor, clamped to [1, max_len - 1]."""
    rows, device = count_sources(src)
    limits = torch.as_tensor(max_len, dtype=torch.long, device=device).expand(rows)
    return limits.clamp(1, model.config.max_len - 1)


def constrain(model: Transformer, log_probs: torch.Tensor, tokens: torch.Tensor, max_out: torch.Tensor,
              options: DecodeOptions, forced: torch.Tensor | None = None) -> torch.Tensor:
    """Apply the decoding rules in place to next-token log_probs (R, V), given each row's
    generated tokens (R, t) and maximum output length (R,). forced (R,): the token a row's given
    prefix writes at this step, pad where it has none (forced_at)."""
    cfg = model.config
    step = tokens.size(1)
    eos = log_probs[:, cfg.eos_id].clone()
    given = None if forced is None else log_probs.gather(1, forced[:, None])  # before any rule
    log_probs[:, [cfg.pad_id, cfg.bos_id]] = NEG_INF
    if step < options.min_len:
        log_probs[:, cfg.eos_id] = NEG_INF
    if options.no_repeat_ngram:
        banned = _repeated_ngrams(tokens, options.no_repeat_ngram, log_probs.size(1))
        if banned is not None:
            log_probs.masked_fill_(banned, NEG_INF)
    at_max = step + 1 >= max_out
    if bool(at_max.any()):  # the last position: eos only, whatever min_len says
        log_probs[at_max] = NEG_INF
        log_probs[at_max, cfg.eos_id] = eos[at_max]
    if forced is not None:  # a prefix's token is the only choice, at the model's own log-probability
        rows = forced.ne(cfg.pad_id)[:, None]
        log_probs.masked_fill_(rows, NEG_INF).scatter_(1, forced[:, None], torch.where(rows, given, NEG_INF))
    return log_probs


def _repeated_ngrams(tokens: torch.Tensor, n: int, vocab: int) -> torch.Tensor | None:
    """(R, V) bool: tokens that would complete an n-gram already present in each row."""
    rows, t = tokens.shape
    if t < n:
        return None
    windows = tokens.unfold(1, n, 1)  # (R, W, n), every n-gram so far
    match = (windows[:, :, :-1] == tokens[:, t - n + 1:][:, None, :]).all(dim=-1)  # same n-1 prefix
    hits = torch.zeros(rows, vocab, device=tokens.device).scatter_add_(1, windows[:, :, -1], match.float())
    return hits > 0


def forced_at(prefix: torch.Tensor | None, step: int) -> torch.Tensor | None:
    """The token each row's prefix (R, P) writes at this step (pad: none), or None past every prefix."""
    return None if prefix is None or step >= prefix.size(1) else prefix[:, step]


def check_prefix(model: Transformer, prefix: torch.Tensor | None, max_out: torch.Tensor) -> None:
    """A prefix (B, P) of forced ids, right-padded with pad, must leave room for its sentence's eos."""
    if prefix is None:
        return
    if prefix.dim() != 2 or prefix.size(0) != max_out.numel() or prefix.dtype != torch.long:
        raise ValueError(f"prefix must be a (sentences, length) tensor of token ids, one row per source "
                         f"({max_out.numel()}), got {prefix.dtype} of shape {tuple(prefix.shape)}")
    lengths = prefix.ne(model.config.pad_id).sum(dim=1)
    too_long = (lengths >= max_out).nonzero().flatten().tolist()
    if too_long:
        i = too_long[0]
        raise ValueError(f"prefix {i} has {int(lengths[i])} tokens, which leaves no room for <eos> in a maximum "
                         f"output length of {int(max_out[i])} tokens")
