"""Sentences in, text out: the decoders (beam_search.py, greedy.py, sampling.py) on text, with a notice
for everything done to a sentence that its translation alone does not show (empty, truncated, unknown
characters, not the form a synthetic task's model learnt, output cut at the maximum length).

Sources are ``tokenizer.encode(text) + [eos]``; one longer than the model's max_len is cut to
max_len - 1 tokens plus eos. The maximum output length is a·|source| + b tokens (section 6.1:
input length + 50), clamped to max_len - 1 (the target with its bos must fit in max_len).
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from ..data import tasks
from ..data.batching import pad_ids
from ..data.tokenizer import EOS_ID, Tokenizer
from ..model.transformer import Transformer
from . import compiled, precision
from .beam_search import beam_search
from .greedy import greedy_decode
from .options import DecodeOptions, resolve_options
from .prefix import prefix_notice, prefixes_for
from .sampling import make_generator, sample
from .step_rules import NEG_INF
from .steps import Hypothesis, Sources, inference

# Notices that translate() does not warn about: an empty input's empty output explains itself, and a
# clamped length limit changes no output by itself (an output cut at the limit has its own notice).
EMPTY_INPUT = "empty input"
CLAMPED_LIMIT = "maximum output length"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# translate_detailed encodes a batch in groups of this many sentences of similar length, each padded
# only to its own longest: cross-attention then reads little padding, and the encoder's activations
# stay small enough for the CPU's caches (Multi30k test_2016 on a 2-core CPU, interleaved runs: groups
# of 128 in batches of 1,024 sentences decode greedily 1.2-1.3x faster than batches of 256 encoded
# whole; groups of 64 and 256 were as fast as 128).
SOURCE_GROUP = 128


@dataclass
class Translation:
    text: str                        # detokenized best output
    ids: list[int]                   # output ids without bos/eos
    tokens: list[str]                # token strings of ids (for plots)
    token_logprobs: list[float]      # log-prob of each output token, then of eos: len(ids) + 1 entries
    score: float                     # beam: length-normalised; greedy/sample: sum of token_logprobs
    n_best: list[tuple[str, float]]  # (text, score), best first; n_best entries (fewer if fewer finished)
    source_tokens: list[str]         # the source as fed to the encoder, "<eos>" included
    notices: list[str] = field(default_factory=list)  # what was done to the input, in words
    prefix_length: int = 0           # the first ids forced by a prefix (token_logprobs: the model's own for them)

    @property
    def confidence(self) -> float:
        """The geometric mean of the output tokens' probabilities (eos included), exp(mean log-prob):
        how sure the model was of what it wrote, whatever the length. NaN when nothing was decoded."""
        if not self.token_logprobs:
            return math.nan
        return math.exp(sum(self.token_logprobs) / len(self.token_logprobs))


# ----- sources -----------------------------------------------------------------------------
@dataclass
class Source:
    """A sentence ready for the encoder, and what was done to it."""

    ids: list[int]       # tokenizer.encode(text) + [eos], truncated to max_len; [] if empty
    tokens: list[str]
    notices: list[str]

    @property
    def empty(self) -> bool:
        return not self.ids


def prepare_source(tokenizer: Tokenizer, text: str, max_len: int, info: dict[str, Any] | None = None) -> Source:
    """Encode text for a model whose sequences hold at most max_len tokens; info, its checkpoint's
    config (bundle.info), lets a synthetic task's model say when text is not of its task's form."""
    if not isinstance(text, str):
        raise TypeError(f"a source sentence must be a str, got {type(text).__name__}")
    surrogate = LONE_SURROGATE.search(text)
    if surrogate:  # what undecodable bytes become under errors="surrogateescape"; the tokenizer rejects them
        raise ValueError(f"character {surrogate.start() + 1} is U+{ord(surrogate[0]):04X}, not text: was it read "
                         f"from bytes that are not UTF-8?")
    ids, unknown = tokenizer.encode_with_unknown(text) if text.strip() else ([], [])
    if not ids:
        return Source([], [], [EMPTY_INPUT])
    ids = ids + [EOS_ID]  # as batching.source_ids gives training sources
    notices = []
    if unknown:
        shown = ", ".join(repr(p) for p in dict.fromkeys(unknown))
        notices.append(f"{len(unknown)} unknown piece{'s' * (len(unknown) > 1)} mapped to <unk>: {shown}")
    if len(ids) > max_len:
        notices.append(f"source truncated from {len(ids) - 1} to {max_len - 1} tokens "
                       f"(the model's max_len is {max_len} with <eos>)")
        ids = ids[:max_len - 1] + ids[-1:]
    form = tasks.form_notice(info or {}, text)
    return Source(ids, tokenizer.tokens(ids), notices + ([form] if form else []))


def max_output_length(source_length: int, options: DecodeOptions, model_max_len: int) -> tuple[int, str | None]:
    """a·|source| + b output tokens (eos included), clamped to [1, max_len - 1]; and a notice if clamped."""
    wanted = int(options.max_len_a * source_length + options.max_len_b)
    limit = model_max_len - 1
    if wanted > limit:
        return limit, (f"{CLAMPED_LIMIT} {wanted} clamped to {limit} tokens "
                       f"(the model's max_len is {model_max_len} with <bos>)")
    return max(wanted, 1), None


# ----- sentences in, text out ----------------------------------------------------------------
def translate(bundle: Any, sentences: Iterable[str], **options: Any) -> list[str]:
    """Translate sentences with bundle.model, reading them with bundle.tokenizer and writing with its
    target_tokenizer (e.g. a ModelBundle; the same tokenizer when the vocabulary is shared); options
    are DecodeOptions fields, prefix and target_lang (see translate_detailed). What happened to a sentence that the
    text alone does not show (source truncated, unknown characters, not the form a synthetic task's model
    reads, output cut at the maximum length, no hypothesis possible) is reported with warnings.warn;
    translate_detailed returns every notice."""
    check_bundle(bundle)
    sentences = text_list(sentences, "sentences")  # a generator is read once: the warnings need them too
    results = translate_detailed(bundle, sentences, **options)
    for text, result in zip(sentences, results):
        for notice in result.notices:
            if notice != EMPTY_INPUT and not notice.startswith(CLAMPED_LIMIT):
                warnings.warn(f"{notice}: {text[:40]!r}{'...' * (len(text) > 40)}", stacklevel=2)
    return [r.text for r in results]


def translate_detailed(bundle: Any, sentences: list[str], options: DecodeOptions | None = None, *,
                       prefix: str | list[str] | None = None, on_batch: Callable[[int], None] | None = None,
                       target_lang: str | None = None, **overrides: Any) -> list[Translation]:
    """Translate sentences, in batches of options.sentences_per_batch sentences of similar length,
    returned in input order. on_batch(n) is called after each batch of n sentences.

    prefix: a beginning every output must have (one str for all sentences, or a list with one per
    sentence; "" for none), with any method: its tokens are forced (core/inference/prefix.py says how text
    becomes them, and what is refused), then the method goes on. Translation.prefix_length counts
    them; their token_logprobs are the model's own, and count in the score.

    target_lang: the language to translate into, for a model serving both directions of a pair
    (core/data/directions.py; None: its first direction, or the one bundle.toward() bound it to)."""
    check_bundle(bundle)
    bundle = toward(bundle, target_lang)
    sentences = text_list(sentences, "sentences")
    if on_batch is not None and not callable(on_batch):
        raise TypeError(f"on_batch must be a function taking a number of sentences, got {type(on_batch).__name__}")
    opts = resolve_options(options, overrides)
    tokenizer, target = bundle.tokenizer, target_tokenizer(bundle)
    model = precision.prepared(bundle.model, opts.dtype)  # bundle.model itself for fp32
    if opts.compiled:  # its eager self where no C++ compiler is found
        model = compiled.prepared(model)
    max_len = model.config.max_len
    sources = []
    for number, text in enumerate(sentences):
        try:
            sources.append(prepare_source(tokenizer, text, max_len, getattr(bundle, "info", None)))
        except (TypeError, ValueError) as exc:  # named as the caller's list indexes it
            raise (TypeError if isinstance(exc, TypeError) else ValueError)(f"sentences[{number}]: {exc}") from None
    prefixes = prefixes_for(target, prefix, len(sentences), max_len - 1)  # the prefix is target text
    results = [_empty_translation(s) if s.empty else None for s in sources]
    order = sorted((i for i, s in enumerate(sources) if not s.empty), key=lambda i: len(sources[i].ids))
    generator = make_generator(opts, next(model.parameters()).device) if opts.method == "sample" else None
    with inference(model):
        for start in range(0, len(order), opts.sentences_per_batch):
            batch = order[start:start + opts.sentences_per_batch]
            translated = _translate_batch(model, target, [sources[i] for i in batch], [prefixes[i] for i in batch],
                                          opts, generator)
            for i, translation in zip(batch, translated):
                results[i] = translation
            if on_batch:
                on_batch(len(batch))
    return results


def _translate_batch(model: Transformer, tokenizer: Tokenizer, sources: list[Source], prefixes: list[list[int]],
                     opts: DecodeOptions, generator: torch.Generator | None) -> list[Translation]:
    """One batch of non-empty sources, each with the ids its prefix forces ([]: none); tokenizer writes the outputs."""
    max_len = model.config.max_len
    device = next(model.parameters()).device
    limits = [_output_limit(len(s.ids), len(p), opts, max_len) for s, p in zip(sources, prefixes)]
    src = [pad_ids([s.ids for s in sources[g:g + SOURCE_GROUP]], device) for g in range(0, len(sources), SOURCE_GROUP)]
    max_out = torch.tensor([n for n, _ in limits], device=device)
    forced = pad_ids(prefixes, device) if any(prefixes) else None
    results = []
    for source, forced_ids, (limit, notices), hyps in zip(sources, prefixes, limits,
                                                           _decode(model, src, max_out, opts, generator, forced)):
        if hyps and len(hyps[0].ids) >= limit:  # eos came at the last position allowed: forced
            notices.append(f"output stopped at the maximum length ({limit - 1} tokens and <eos>): it may be cut short")
        notice = prefix_notice(tokenizer, forced_ids, _strip_eos(hyps[0].ids)) if hyps else None
        results.append(_translation(tokenizer, source, hyps, notices + ([notice] if notice else []), len(forced_ids)))
    return results


def _output_limit(source_length: int, prefix_length: int, options: DecodeOptions,
                  model_max_len: int) -> tuple[int, list[str]]:
    """max_output_length, raised where a prefix and its <eos> would not fit; and the notices."""
    limit, notice = max_output_length(source_length, options, model_max_len)
    notices = [notice] if notice else []
    if prefix_length + 1 > limit:  # prefixes_for refused one that the model's max_len cannot hold
        notices.append(f"{CLAMPED_LIMIT} raised from {limit} to {prefix_length + 1} tokens to hold the prefix and "
                       f"<eos>")
        limit = prefix_length + 1
    return limit, notices


def toward(bundle: Any, target_lang: str | None) -> Any:
    """bundle translating into target_lang (core.bundle.ModelBundle.toward); any other object with a model and a
    tokenizer translates one way."""
    if hasattr(bundle, "toward"):
        return bundle.toward(target_lang)
    if target_lang is not None:
        raise ValueError(f"target_lang {target_lang!r} needs a core.ModelBundle of a model serving both directions")
    return bundle


def check_bundle(bundle: Any) -> None:
    if not (hasattr(bundle, "model") and hasattr(bundle, "tokenizer")):
        raise TypeError(f"bundle must be a ModelBundle (core.load_checkpoint(folder) returns one) or hold .model "
                        f"and .tokenizer, got {type(bundle).__name__}")


def target_tokenizer(bundle: Any) -> Tokenizer:
    """The tokenizer that writes the bundle's outputs: a ModelBundle's target_tokenizer (its own with separate
    vocabularies), else .tokenizer, the one an object holding .model and .tokenizer shares between sides."""
    return getattr(bundle, "target_tokenizer", bundle.tokenizer)


def text_list(texts: Any, what: str) -> list:
    """texts (any iterable, a generator too) as a list; a TypeError naming `what` for one string or a
    non-iterable. Its items are the caller's to check (translation names them as it prepares them)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{what} must be a list of str, not a single {type(texts).__name__}: wrap it in a list")
    try:
        return list(texts)
    except TypeError:
        raise TypeError(f"{what} must be a list of str, got {type(texts).__name__}") from None


def str_list(texts: Any, what: str) -> list[str]:
    """texts as a list, each a str; else a TypeError naming `what` and the first item that is not."""
    texts = text_list(texts, what)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{i}] must be a str, got {type(text).__name__} {str(text)[:40]!r}")
    return texts



def _decode(model: Transformer, src: Sources, max_out: torch.Tensor, options: DecodeOptions,
            generator: torch.Generator | None, prefix: torch.Tensor | None) -> list[list[Hypothesis]]:
    if options.method == "beam":
        return beam_search(model, src, max_out, options, prefix)
    if options.method == "greedy":
        return [[h] if h else [] for h in greedy_decode(model, src, max_out, options, prefix)]
    return [[h] if h else [] for h in sample(model, src, max_out, options, generator, prefix)]


def _strip_eos(ids: list[int]) -> list[int]:
    return ids[:-1] if ids and ids[-1] == EOS_ID else ids


def _translation(tokenizer: Tokenizer, source: Source, hyps: list[Hypothesis], notices: list[str],
                 prefix_length: int) -> Translation:
    if not hyps:  # only when every continuation was forbidden (e.g. no_repeat_ngram on a tiny vocabulary)
        hyps = [Hypothesis([], [], NEG_INF, NEG_INF)]
        notices = notices + ["no hypothesis could be completed"]
    best = hyps[0]
    ids = _strip_eos(best.ids)
    return Translation(tokenizer.decode(ids), ids, tokenizer.tokens(ids), list(best.token_logprobs), best.score,
                       [(tokenizer.decode(_strip_eos(h.ids)), h.score) for h in hyps],
                       source.tokens, source.notices + notices, prefix_length if best.ids else 0)


def _empty_translation(source: Source) -> Translation:
    return Translation("", [], [], [], 0.0, [("", 0.0)], [], list(source.notices))
