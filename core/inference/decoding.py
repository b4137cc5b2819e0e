"""Inference: greedy decoding and beam search, batched over sentences on the decoder's key/value
cache (each step feeds one new token per hypothesis); core.inference.sampling draws on the same steps.

Section 6.1 of the paper: "we used beam search with a beam size of 4 and length penalty
α = 0.6 ... We set the maximum output length during inference to input length + 50, but
terminate early when possible." The length penalty is GNMT's (Wu et al. 2016, section 7):

    lp(Y) = (5 + |Y|)^α / (5 + 1)^α,        score(Y) = log P(Y | X) / lp(Y)

(without GNMT's coverage penalty); ``length_penalty="plain"`` divides by |Y|^α instead.

Conventions (shared with core.inference.beam, the studio and the CLI):
- source ids are ``tokenizer.encode(text) + [eos]``, right-padded with pad (core.inference.translation
  prepares them from text);
- |Y| counts the generated tokens including eos;
- the maximum output length is a·|source| + b tokens including eos, |source| counting the
  source's eos (the paper: a = 1, b = 50), clamped to the model's max_len - 1 (the target with
  its bos must fit in max_len); at that length eos is forced, so every hypothesis ends in eos;
- pad and bos are never generated; ``min_len`` forbids eos before that many tokens;
  ``no_repeat_ngram`` = n forbids any n-gram to occur twice in an output;
- beam search expands the 2·beam best (hypothesis, token) pairs of each sentence per step,
  as fairseq does: those ending in eos among the best ``beam`` become finished hypotheses, the
  ``beam`` best others stay live; a sentence stops once it has ``beam`` finished hypotheses or
  reaches its maximum length, and leaves the batch (finished sentences cost nothing).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch

from ..model.cache import DecoderCache
from ..model.config import INT64_MAX
from ..model.transformer import Transformer
from . import ranking

METHODS = ("greedy", "beam", "sample")
LENGTH_PENALTIES = ("gnmt", "plain")
DTYPES = ("fp32", "int8", "bf16")  # core/inference/precision.py builds the last two
# Sampling that reads as language (DecodeOptions' defaults draw from the plain distribution, T = 1, no
# cut-off). On the shipped model, test_2016's first 300 sentences, 3 seeds: T = 1 scores 23-25 BLEU and
# reads as nonsense ("People repair floor at truck.i a house."); T = 0.8 with top-p 0.9 scores 34-36
# (greedy: 36) and still varies from draw to draw. The studio and train_cli start there.
SAMPLE_TEMPERATURE, SAMPLE_TOP_P = 0.8, 0.9
PRUNED, LIVE, FINISHED = 0, 1, 2  # beam candidates' fate, see StepRecord.status
NEG_INF = float("-inf")


# ----- options and hypotheses ---------------------------------------------------------------
@dataclass
class DecodeOptions:
    method: str = "beam"            # "greedy" | "beam" | "sample"
    beam_size: int = 4
    alpha: float = 0.6              # length-penalty exponent; 0 ranks by raw log-probability
    length_penalty: str = "gnmt"    # "gnmt": ((5+|Y|)/6)^alpha | "plain": |Y|^alpha
    max_len_a: float = 1.0          # max output length = a * |source| + b (clamped to max_len - 1)
    max_len_b: int = 50
    min_len: int = 0                # eos is forbidden before this many output tokens
    n_best: int = 1                 # beam only: return this many hypotheses (<= beam_size)
    no_repeat_ngram: int = 0        # 0: off; n: no n-gram occurs twice in an output
    temperature: float = 1.0        # sampling only
    top_k: int = 0                  # sampling only; 0: off
    top_p: float = 1.0              # sampling only (nucleus); 1: off
    # Sampling only; None: a fresh random seed. One seed repeats a whole call (the same sentences in
    # the same order and batch_size): its draws run through the call's sentences in turn.
    seed: int | None = None
    # Sentences decoded together (beam search runs batch_size * beam_size rows). None: 1,024 for greedy
    # and sampling, 256 for beam search, about 1,024 rows either way (2-core CPU, bench/decode.py:
    # greedy gains from 1,024 sentences over 256, beam search from more than 256 does not).
    batch_size: int | None = None
    # core.translate's arithmetic (core/inference/precision.py): "fp32" exact, "int8" or "bf16" faster, nearly the same
    # outputs. The tensor-level decoders here run the model they are given.
    dtype: str = "fp32"
    # core.translate decodes one sentence at a time with a compiled decoder step (core/inference/compiled.py):
    # faster for one sentence on a CPU, after a compile of 10-30 s per shape; batches are faster eager.
    compiled: bool = False

    @property
    def sentences_per_batch(self) -> int:
        """batch_size, or the default when it is None: 1 compiled, else the method's."""
        if self.batch_size is not None:
            return self.batch_size
        if self.compiled:
            return 1
        return 256 if self.method == "beam" else 1024

    def validate(self) -> None:
        """Raise ValueError naming the offending option and its allowed values."""
        if self.method not in METHODS:
            raise ValueError(f"DecodeOptions.method must be one of {', '.join(METHODS)}; got {self.method!r}")
        if self.length_penalty not in LENGTH_PENALTIES:
            raise ValueError(f"DecodeOptions.length_penalty must be one of {', '.join(LENGTH_PENALTIES)}; "
                             f"got {self.length_penalty!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"DecodeOptions.dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if not isinstance(self.compiled, bool):
            raise ValueError(f"DecodeOptions.compiled must be True or False; got {self.compiled!r}")
        if self.compiled and self.dtype == "int8":
            raise ValueError("DecodeOptions.compiled runs fp32 or bf16 weights, not int8 (dynamic quantization)")
        for name, low in (("beam_size", 1), ("max_len_b", 0), ("min_len", 0), ("n_best", 1),
                          ("no_repeat_ngram", 0), ("top_k", 0)):
            _check_int(name, getattr(self, name), low)
        if self.batch_size is not None:
            _check_int("batch_size", self.batch_size, 1)
        # The paper uses 0.6 and GNMT tuned it in [0, 1]; very large values overflow the penalty.
        _check_number("alpha", self.alpha, "in [0, 10]", lambda x: 0 <= x <= 10)
        _check_number("max_len_a", self.max_len_a, ">= 0", lambda x: x >= 0)
        _check_number("temperature", self.temperature, "> 0", lambda x: x > 0)
        _check_number("top_p", self.top_p, "in (0, 1]", lambda x: 0 < x <= 1)
        if self.seed is not None:
            _check_int("seed", self.seed, 0)
        limit = self.beam_size if self.method == "beam" else 1
        if self.n_best > limit:
            raise ValueError(f"DecodeOptions.n_best must be between 1 and {limit} for method "
                             f"{self.method!r} (at most beam_size for beam search, 1 otherwise); got {self.n_best}")


def _check_int(name: str, value: Any, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"DecodeOptions.{name} must be an integer >= {low}; got {value!r}")
    if value > INT64_MAX:
        raise ValueError(f"DecodeOptions.{name} must be at most 2**63 - 1; got {value!r}")


def _check_number(name: str, value: Any, allowed: str, ok: Callable[[float], bool]) -> None:
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or not ok(value)):
        raise ValueError(f"DecodeOptions.{name} must be a number {allowed}; got {value!r}")


def resolve_options(options: DecodeOptions | None, overrides: dict[str, Any]) -> DecodeOptions:
    """options (default DecodeOptions()) with keyword overrides applied, validated."""
    names = {f.name for f in dataclasses.fields(DecodeOptions)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(f"unknown decoding option(s) {unknown}; allowed: {sorted(names)}")
    if options is not None and not isinstance(options, DecodeOptions):
        raise TypeError(f"options must be a DecodeOptions, got {type(options).__name__} {str(options)[:40]!r}; "
                        f"or pass decoding options as keywords, e.g. method=\"greedy\"")
    # numpy's integers (np.int64 from an array) are whole numbers too; the checks below take Python's.
    overrides = {name: int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
                 for name, value in overrides.items()}
    resolved = dataclasses.replace(options or DecodeOptions(), **overrides)
    resolved.validate()
    return resolved


@dataclass(frozen=True)
class Hypothesis:
    """One output of the tensor-level decoders."""

    ids: list[int]               # generated ids, ending with eos
    token_logprobs: list[float]  # the model's log-probability of each id (eos included)
    logprob: float               # their sum, log P(Y | X)
    score: float                 # beam: logprob / lp(|Y|); greedy and sampling: logprob


# ----- shared step machinery ---------------------------------------------------------------
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


def length_penalty(length: int, options: DecodeOptions) -> float:
    if options.length_penalty == "gnmt":
        return ((5 + length) / 6) ** options.alpha
    return length ** options.alpha


def copy_cache(cache: DecoderCache) -> DecoderCache:
    """A cache the next decode_step may extend without touching the original (tensors are shared)."""
    return dataclasses.replace(cache, self_kv=list(cache.self_kv))


def _repeated_ngrams(tokens: torch.Tensor, n: int, vocab: int) -> torch.Tensor | None:
    """(R, V) bool: tokens that would complete an n-gram already present in each row."""
    rows, t = tokens.shape
    if t < n:
        return None
    windows = tokens.unfold(1, n, 1)  # (R, W, n), every n-gram so far
    match = (windows[:, :, :-1] == tokens[:, t - n + 1:][:, None, :]).all(dim=-1)  # same n-1 prefix
    hits = torch.zeros(rows, vocab, device=tokens.device).scatter_add_(1, windows[:, :, -1], match.float())
    return hits > 0


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


def last_tokens(model: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    if tokens.size(1):
        return tokens[:, -1]
    return torch.full((tokens.size(0),), model.config.bos_id, dtype=torch.long, device=tokens.device)


Sources = torch.Tensor | Sequence[torch.Tensor]  # (B, S) ids, or groups of them (Transformer.start_decoding)


def count_sources(src: Sources) -> tuple[int, torch.device]:
    """How many sources src holds, and their device."""
    groups = [src] if isinstance(src, torch.Tensor) else src
    if not groups:
        raise ValueError("no source sentences to decode")
    return sum(group.size(0) for group in groups), groups[0].device


def _lengths(src: Sources, max_len: torch.Tensor | int, model: Transformer) -> torch.Tensor:
    """Per-row maximum output length as a (B,) tensor, clamped to [1, max_len - 1]."""
    rows, device = count_sources(src)
    limits = torch.as_tensor(max_len, dtype=torch.long, device=device).expand(rows)
    return limits.clamp(1, model.config.max_len - 1)


# ----- beam search: one step function for the one-shot search and core.inference.beam's stepper ------
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


# ----- tensor-level decoders ---------------------------------------------------------------
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
        state = beam_start(model, src, _lengths(src, max_len, model), prefix)
        while not state.done:
            state, _ = beam_step(model, state, opts)
    return [ranked(f)[:opts.n_best] for f in state.finished]


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
        max_out = _lengths(src, max_len, model)
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
