"""Scoring a given translation: the model's log-probability of a target sentence under teacher
forcing (fairseq's ``--score-reference``).

Section 3 of the paper: the decoder is auto-regressive, "consuming the previously generated
symbols as additional input when generating the next", so

    log P(Y | X) = sum_t log P(y_t | y_1 .. y_{t-1}, X)

and teacher forcing (section 5, training) feeds the given target y_1 .. y_{t-1} instead of the
model's own choices: one pass of the whole pair (Transformer.hidden) gives every term at once.
Scoring the model's own greedy output therefore returns the greedy decoder's own log-probabilities.

A pair is read as the decoders read it: the source is ``tokenizer.encode(text) + [eos]`` (cut to
max_len - 1 tokens and <eos>), the target's tokens are followed by <eos>, which is scored too, and
hold at most max_len - 1 tokens with it (the longest output the decoders write; a longer target is
cut there, with a notice). core.explain.saliency and core.explain.arithmetic read pairs the same way (prepare_pair).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from ..data.batching import pad_ids
from ..data.tokenizer import BOS_ID, EOS_ID
from . import ranking
from .steps import inference
from .translation import check_bundle, prepare_source, str_list, target_tokenizer, text_list, toward

EMPTY_TARGET = "empty target: only <eos> is scored"


@dataclass
class Pair:
    """A (source, target) pair as the model reads it under teacher forcing."""

    src: list[int]            # the encoder's input: source ids + eos; [] for an empty source
    tgt: list[int]            # what is scored: target ids + eos
    source_tokens: list[str]  # src as token strings, "<eos>" last
    tokens: list[str]         # tgt as token strings, "<eos>" last
    notices: list[str]        # what was done to the input, in words

    @property
    def tgt_in(self) -> list[int]:
        """The decoder's input: <bos> and the target shifted right (section 3.1)."""
        return [BOS_ID] + self.tgt[:-1]

    @property
    def empty(self) -> bool:
        return not self.src


def prepare_pair(bundle: Any, source: str, target: str | Sequence[int]) -> Pair:
    """Encode a pair for teacher forcing. target: text, or token ids without <eos> (e.g.
    Translation.ids: exactly the tokens a decoder wrote, where text would be re-tokenized). A
    source too long is cut as translation cuts it, a target past max_len - 1 tokens (with <eos>)
    likewise, each with a notice; an empty target scores <eos> alone (a notice says so); an empty
    source gives a Pair whose .empty is True."""
    check_bundle(bundle)
    bundle = toward(bundle, None)  # a model serving both directions reads its source with a language tag
    tokenizer, target_side, max_len = bundle.tokenizer, target_tokenizer(bundle), bundle.model.config.max_len
    src = prepare_source(tokenizer, source, max_len, getattr(bundle, "info", None))
    ids, notices = _target_ids(target_side, target)
    longest = max_len - 2  # <bos> + ids must fit in max_len positions, and <eos> follows the last id
    if len(ids) > longest:
        notices.append(f"target truncated from {len(ids)} to {longest} tokens (the model's max_len is {max_len} "
                       f"with <bos>); <eos> is scored after the cut")
        ids = ids[:longest]
    tgt = ids + [EOS_ID]
    return Pair(src.ids, tgt, src.tokens, target_side.tokens(tgt), src.notices + notices)


def _target_ids(tokenizer: Any, target: str | Sequence[int]) -> tuple[list[int], list[str]]:
    if isinstance(target, str):
        if not target.strip():
            return [], [EMPTY_TARGET]
        unknown = tokenizer.unknown_pieces(target)
        shown = ", ".join(repr(p) for p in dict.fromkeys(unknown))
        notices = [f"target: {len(unknown)} unknown piece{'s' * (len(unknown) > 1)} mapped to <unk>: {shown}"]
        return tokenizer.encode(target), notices if unknown else []
    if isinstance(target, (bytes, dict, set)) or not isinstance(target, Sequence):
        raise TypeError(f"a target must be a str or a list of token ids, got {type(target).__name__}")
    ids = list(target)
    bad = [i for i in ids if not isinstance(i, int) or isinstance(i, bool) or not 3 <= i < tokenizer.vocab_size]
    if bad:  # 0-2 are <pad>, <bos>, <eos>: the model places those itself
        raise ValueError(f"target token ids must be integers from 3 to {tokenizer.vocab_size - 1} (no <pad>, <bos> "
                         f"or <eos>); got {bad[0]!r}")
    return ids, ([] if ids else [EMPTY_TARGET])


@dataclass
class Score:
    """The model's view of one given target, token by token (<eos> included, last)."""

    tokens: list[str]                # the target as scored, "<eos>" last
    ids: list[int]                   # their ids
    token_logprobs: list[float]      # log P(y_t | y_<t, x), natural log, one per token
    ranks: list[int]                 # 1 + how many tokens the model preferred there (1: its own top choice)
    alternatives: list[list[tuple[str, float]]]  # per token, the top_k (token, probability) there, best first
    source_tokens: list[str]         # the source as the encoder read it, "<eos>" last
    notices: list[str] = field(default_factory=list)  # what was done to the input, in words

    @property
    def sum(self) -> float:
        """log P(Y | X): the sum of token_logprobs (NaN for an empty source, which nothing scores)."""
        return math.fsum(self.token_logprobs) if self.token_logprobs else math.nan

    @property
    def mean(self) -> float:
        """The length-normalised score: the mean log-probability per token, <eos> included."""
        return self.sum / len(self.token_logprobs) if self.token_logprobs else math.nan

    @property
    def perplexity(self) -> float:
        """exp(-mean): the model's per-token perplexity of this target."""
        return math.exp(-self.mean)

    @property
    def mean_rank(self) -> float:
        return sum(self.ranks) / len(self.ranks) if self.ranks else math.nan


def score(bundle: Any, sources: Sequence[str], targets: Sequence[str | Sequence[int]], *, top_k: int = 5,
          batch_size: int = 64, on_batch: Callable[[int], None] | None = None,
          target_lang: str | None = None) -> list[Score]:
    """Score each target as a translation of its source, by teacher forcing, in input order.

    targets: text, or token ids without <eos> (Translation.ids). Pairs run batch_size at a time,
    sorted by length and padded, in eval mode without gradients; on_batch(n) is called after each
    batch of n pairs (and once for the empty sources, first). ranks and alternatives leave out
    <pad> and <bos>, which the decoders never write; so a greedy output's tokens all rank 1 (unless
    eos was forced at the maximum length). An empty source scores nothing: empty lists, NaN figures
    and the notice "empty input". See prepare_pair for empty and too-long targets. target_lang: as
    translate_detailed's, for a model serving both directions.
    """
    check_bundle(bundle)
    bundle = toward(bundle, target_lang)
    sources, targets = str_list(sources, "sources"), text_list(targets, "targets")
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets; they must pair up one to one")
    for name, value, low in (("top_k", top_k, 0), ("batch_size", batch_size, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    if top_k > bundle.model.config.tgt_vocab_size - 2:
        raise ValueError(f"top_k must be at most {bundle.model.config.tgt_vocab_size - 2} (the vocabulary without "
                         f"<pad> and <bos>); got {top_k}")
    pairs = []
    for i, (source, target) in enumerate(zip(sources, targets)):
        try:
            pairs.append(prepare_pair(bundle, source, target))
        except (TypeError, ValueError) as exc:  # named as the caller's lists index them
            raise type(exc)(f"pair {i} (sources[{i}], targets[{i}]): {exc}") from None
    results: list[Score | None] = [_unscored(p) if p.empty else None for p in pairs]
    order = sorted((i for i, p in enumerate(pairs) if not p.empty), key=lambda i: len(pairs[i].tgt))
    if on_batch and len(order) < len(pairs):
        on_batch(len(pairs) - len(order))  # the empty sources, done
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        for i, result in zip(batch, _score_batch(bundle, [pairs[i] for i in batch], top_k)):
            results[i] = result
        if on_batch:
            on_batch(len(batch))
    return results


def _unscored(pair: Pair) -> Score:
    return Score([], [], [], [], [], [], list(pair.notices))  # prepare_source's "empty input" among them


def _score_batch(bundle: Any, pairs: list[Pair], top_k: int) -> list[Score]:
    model, tokenizer = bundle.model, target_tokenizer(bundle)
    device = next(model.parameters()).device
    with inference(model):
        src = pad_ids([p.src for p in pairs], device)
        tgt_in = pad_ids([p.tgt_in for p in pairs], device)
        # The real positions only, row-major: pair by pair, token by token (Transformer.hidden).
        log_probs = torch.log_softmax(model.project(model.hidden(src, tgt_in)).float(), dim=-1)
        chosen = log_probs.gather(1, torch.tensor([i for p in pairs for i in p.tgt], device=device)[:, None])
        log_probs[:, [model.config.pad_id, model.config.bos_id]] = -math.inf  # never written by a decoder
        ranks = (log_probs > chosen).sum(dim=1) + 1
        top_lp, top_ids = ranking.top_k(log_probs, top_k)
    alternatives = [list(zip(tokenizer.tokens(ids), probs)) for ids, probs in zip(top_ids.tolist(),
                                                                                  top_lp.exp().tolist())]
    chosen, ranks = chosen.squeeze(1).tolist(), ranks.tolist()
    results, start = [], 0
    for p in pairs:
        end = start + len(p.tgt)
        results.append(Score(p.tokens, p.tgt, chosen[start:end], ranks[start:end], alternatives[start:end],
                             p.source_tokens, p.notices))
        start = end
    return results
