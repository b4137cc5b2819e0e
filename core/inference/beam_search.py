"""Beam search (section 6.1: "beam search with a beam size of 4 and length penalty α = 0.6"), batched
over sentences on the decoder's key/value cache, under the rules of step_rules.py. One step function
serves the one-shot search here and the studio's step-by-step one (stepwise_beam.py).

As fairseq does, each step expands the 2·beam best (hypothesis, token) pairs of each sentence: those
ending in eos among the best ``beam`` become finished hypotheses, the ``beam`` best others stay live; a
sentence stops once it has ``beam`` finished hypotheses or reaches its maximum length, and leaves the
batch (finished sentences cost nothing). Finished hypotheses are ranked by log P(Y | X) / lp(|Y|).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..model.cache import DecoderCache
from ..model.transformer import Transformer
from . import ranking
from .options import DecodeOptions, resolve_options
from .step_rules import NEG_INF, check_prefix, constrain, forced_at, length_penalty, output_lengths
from .steps import Hypothesis, Sources, copy_cache, count_sources, inference, last_tokens

PRUNED, LIVE, FINISHED = 0, 1, 2  # beam candidates' fate, see StepRecord.status


@dataclass
class BeamState:
    """Beam search over N active sentences × R hypotheses (R = 1 before the first step, then
    K), rows sentence-major."""

    cache: DecoderCache
    tokens: torch.Tensor          # (N·R, t) generated ids of each live hypothesis
    token_logprobs: torch.Tensor  # (N·R, t)
    logprobs: torch.Tensor        # (N·R,) cumulative; -inf where no live hypothesis remains
    sentences: list[int]          # original batch index of each active sentence
    max_out: torch.Tensor         # (N,) maximum output length of each active sentence
    finished: list[list[Hypothesis]]  # per original sentence, in the order they finished
    prefix: torch.Tensor | None = None  # (N, P) forced first tokens of each active sentence (check_prefix)

    @property
    def done(self) -> bool:
        return not self.sentences


@dataclass
class StepRecord:
    """What one beam step considered: per active sentence its 2·K best expansions, best first."""

    parents: torch.Tensor         # (N, 2K) expanded hypothesis (index within its sentence)
    tokens: torch.Tensor          # (N, 2K)
    token_logprobs: torch.Tensor  # (N, 2K)
    logprobs: torch.Tensor        # (N, 2K) cumulative
    status: torch.Tensor          # (N, 2K) PRUNED, LIVE or FINISHED
    live: torch.Tensor            # (N, K) candidate index of each new live hypothesis


def beam_search(model: Transformer, src: Sources, max_len: torch.Tensor | int,
                options: DecodeOptions | None = None, prefix: torch.Tensor | None = None,
                **overrides: Any) -> list[list[Hypothesis]]:
    """Beam search for every source in src (B, S), or in its groups; max_len: output tokens per
    source (int or (B,)), eos included. Returns per source its n_best hypotheses, best first.
    prefix (B, P): ids each output must begin with, right-padded with pad (see constrain); their
    log-probabilities count in the scores. options.method is ignored."""
    opts = resolve_options(options, overrides)
    check_beam_fits(model, opts)
    with inference(model):
        state = beam_start(model, src, output_lengths(src, max_len, model), prefix)
        while not state.done:
            state, _ = beam_step(model, state, opts)
    return [ranked(f)[:opts.n_best] for f in state.finished]


def beam_start(model: Transformer, src: Sources, max_out: torch.Tensor,
               prefix: torch.Tensor | None = None) -> BeamState:
    """Encode src once; each sentence starts with one empty hypothesis (K after the first step).
    While a sentence's prefix is forced, one hypothesis holds it and the others stay at -inf."""
    n, device = count_sources(src)
    check_prefix(model, prefix, max_out)
    return BeamState(model.start_decoding(src), torch.empty((n, 0), dtype=torch.long, device=device),
                     torch.empty((n, 0), device=device), torch.zeros(n, device=device), list(range(n)), max_out,
                     [[] for _ in range(n)], prefix)


def check_beam_fits(model: Transformer, options: DecodeOptions) -> None:
    """Each step keeps the 2K best expansions of a sentence, so K must be below the vocabulary."""
    vocab = model.config.tgt_vocab_size
    if options.beam_size >= vocab:
        raise ValueError(f"DecodeOptions.beam_size must be smaller than the vocabulary ({vocab} tokens); "
                         f"got {options.beam_size}")


def beam_step(model: Transformer, state: BeamState, options: DecodeOptions) -> tuple[BeamState, StepRecord]:
    """Advance every active sentence by one token; state is not modified."""
    k, n, t = options.beam_size, len(state.sentences), state.tokens.size(1)
    r = state.logprobs.numel() // n  # hypotheses per sentence: 1 at the first step, then K
    cache = copy_cache(state.cache)
    log_probs = model.decode_step(last_tokens(model, state.tokens), cache)
    forced = forced_at(state.prefix, t)
    log_probs = constrain(model, log_probs, state.tokens, state.max_out.repeat_interleave(r), options,
                          None if forced is None else forced.repeat_interleave(r))
    # A sentence's 2K best expansions lie among each hypothesis's 2K best tokens (adding the
    # hypothesis's log-probability keeps a row's order), so only those are summed and ranked,
    # not all R·V: one pass over the vocabulary instead of two (an add, then topk).
    width = min(2 * k, log_probs.size(1))  # smaller only for tiny vocabularies
    row_lp, row_tokens = ranking.top_k(log_probs, width)
    total = (state.logprobs[:, None] + row_lp).view(n, r * width)
    cand_logprobs, flat = total.topk(min(2 * k, r * width), dim=1)
    parents = flat // width
    cand_tokens = row_tokens.view(n, r * width).gather(1, flat)
    cand_token_lp = row_lp.view(n, r * width).gather(1, flat)
    is_eos = cand_tokens == model.config.eos_id  # at most one per parent: >= K candidates are not eos
    live = torch.sort(is_eos.to(torch.uint8), dim=1, stable=True).indices[:, :k]
    status = torch.full_like(cand_tokens, PRUNED, dtype=torch.int8).scatter_(1, live, LIVE)
    record = StepRecord(parents, cand_tokens, cand_token_lp, cand_logprobs, status, live)
    finished = _finish(state, record, is_eos, t + 1, options)
    rows = (torch.arange(n, device=flat.device)[:, None] * r + parents.gather(1, live)).view(-1)
    tokens = torch.cat([state.tokens[rows], cand_tokens.gather(1, live).view(-1, 1)], dim=1)
    token_lp = torch.cat([state.token_logprobs[rows], cand_token_lp.gather(1, live).view(-1, 1)], dim=1)
    logprobs = cand_logprobs.gather(1, live)
    going = ((logprobs[:, 0] > NEG_INF) & (state.max_out > t + 1)).tolist()
    keep = [i for i, s in enumerate(state.sentences) if going[i] and len(finished[s]) < k]
    logprobs = logprobs.view(-1)
    if len(keep) == n:
        cache.reorder_hypotheses(rows)
        return BeamState(cache, tokens, token_lp, logprobs, state.sentences, state.max_out, finished,
                         state.prefix), record
    keep_t = torch.tensor(keep, dtype=torch.long, device=flat.device)
    kept_rows = (keep_t[:, None] * k + torch.arange(k, device=flat.device)).view(-1)
    return BeamState(cache.select(rows[kept_rows], keep_t), tokens[kept_rows], token_lp[kept_rows],
                     logprobs[kept_rows], [state.sentences[i] for i in keep], state.max_out[keep_t], finished,
                     None if state.prefix is None else state.prefix[keep_t]), record


def _finish(state: BeamState, record: StepRecord, is_eos: torch.Tensor, length: int,
            options: DecodeOptions) -> list[list[Hypothesis]]:
    """Turn eos candidates ranked in the top K into finished hypotheses (at most K per
    sentence); marks them FINISHED in record.status. Returns the new finished lists."""
    k = options.beam_size
    top = is_eos[:, :k] & (record.logprobs[:, :k] > NEG_INF)
    if not bool(top.any()):
        return state.finished
    finished = list(state.finished)
    penalty = length_penalty(length, options)
    r = state.logprobs.numel() // len(state.sentences)
    for i, j in top.nonzero().tolist():
        s = state.sentences[i]
        if len(finished[s]) == k:
            continue
        row = i * r + int(record.parents[i, j])
        logprob = float(record.logprobs[i, j])
        hyp = Hypothesis(state.tokens[row].tolist() + [int(record.tokens[i, j])],
                         state.token_logprobs[row].tolist() + [float(record.token_logprobs[i, j])],
                         logprob, logprob / penalty)
        finished[s] = finished[s] + [hyp]
        record.status[i, j] = FINISHED
    return finished


def ranked(hypotheses: Sequence[Hypothesis]) -> list[Hypothesis]:
    """Best score first; ties keep the order in which they finished."""
    return sorted(hypotheses, key=lambda h: -h.score)
