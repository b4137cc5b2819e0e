"""Decoding options: the search and its settings (section 6.1: "beam search with a beam size of 4 and
length penalty α = 0.6 ... maximum output length during inference to input length + 50"), sampling's,
and the arithmetic. A DecodeOptions is checked once, when it is made (dataclasses.replace makes a new
one, checked too): the translators and decoders that take one trust it.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable

from ..model.config import INT64_MAX

METHODS = ("greedy", "beam", "sample")
LENGTH_PENALTIES = ("gnmt", "plain")
DTYPES = ("fp32", "int8", "bf16")  # core/inference/precision.py builds the last two
# Sampling that reads as language (DecodeOptions' defaults draw from the plain distribution, T = 1, no
# cut-off). On the shipped model, test_2016's first 300 sentences, 3 seeds: T = 1 scores 23-25 BLEU and
# reads as nonsense ("People repair floor at truck.i a house."); T = 0.8 with top-p 0.9 scores 34-36
# (greedy: 36) and still varies from draw to draw. The studio and train_cli start there.
SAMPLE_TEMPERATURE, SAMPLE_TOP_P = 0.8, 0.9


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
    # outputs. The tensor-level decoders run the model they are given.
    dtype: str = "fp32"
    # core.translate decodes one sentence at a time with a compiled decoder step (core/inference/compiled.py):
    # faster for one sentence on a CPU, after a compile of 10-30 s per shape; batches are faster eager.
    compiled: bool = False

    def __post_init__(self) -> None:
        self.validate()

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
    """options (default DecodeOptions()) with keyword overrides applied: options itself when there are
    none (it was checked when made), else a new DecodeOptions, checked as it is made."""
    names = {f.name for f in dataclasses.fields(DecodeOptions)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(f"unknown decoding option(s) {unknown}; allowed: {sorted(names)}")
    if options is not None and not isinstance(options, DecodeOptions):
        raise TypeError(f"options must be a DecodeOptions, got {type(options).__name__} {str(options)[:40]!r}; "
                        f"or pass decoding options as keywords, e.g. method=\"greedy\"")
    if not overrides:
        return options or DecodeOptions()
    # numpy's integers (np.int64 from an array) are whole numbers too; the checks take Python's.
    overrides = {name: int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
                 for name, value in overrides.items()}
    return DecodeOptions(**overrides) if options is None else dataclasses.replace(options, **overrides)
