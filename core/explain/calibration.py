"""Section 5.4's claim about label smoothing, tested on the model in front of you: "This hurts perplexity, as
the model learns to be more unsure, but improves accuracy and BLEU score."

How sure a model is against how often it is right, token by token (teacher forced on references: each position
reads the reference before it): at each position, its top token's probability (its confidence) and whether that
token is the reference's. A reliability diagram (Guo et al., 2017, "On Calibration of Modern Neural Networks"; for
translation Kumar & Sarawagi, 2019, "Calibration of Encoder Decoder Models for Neural Machine Translation") bins
the tokens by confidence and sets each bin's accuracy beside its mean confidence: a calibrated model's points lie on
the diagonal. The expected calibration error (ECE) is their gap, averaged over the bins by their tokens. Two models
that differ only in ε_ls (``compare_calibration``) add their perplexity and BLEU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..inference.options import DecodeOptions
from ..inference.scoring import score
from ..inference.translation import translate_detailed
from ..training.evaluation import EvalResult, evaluate_bleu

GREEDY = DecodeOptions(method="greedy")


@dataclass
class Calibration:
    """Reliability of one model's token probabilities on some sentence pairs."""

    edges: np.ndarray        # (bins + 1,) the bins' edges, 0 to 1
    counts: np.ndarray       # (bins,) the tokens whose confidence falls in each bin ([a, b); the last [a, 1])
    confidence: np.ndarray   # (bins,) their mean confidence (NaN: an empty bin)
    accuracy: np.ndarray     # (bins,) how often their top token was the reference's (NaN: empty)
    ece: float               # sum over bins of counts / tokens · |accuracy - confidence|
    perplexity: float        # exp of the references' mean negative log-probability per token (<eos> included)
    top1: float              # the share of tokens whose top token was the reference's
    mean_confidence: float
    tokens: int
    sentences: int


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Equal-width bins of confidence in [0, 1]: (edges, counts, mean confidence, accuracy, ECE)."""
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise ValueError(f"bins must be an integer >= 1; got {bins!r}")
    p, hit = np.asarray(confidence, dtype=np.float64), np.asarray(correct, dtype=np.float64)
    if p.shape != hit.shape or p.ndim != 1 or not p.size:
        raise ValueError(f"reliability takes one confidence and one outcome per token; got {p.shape} and {hit.shape}")
    which = np.minimum((p * bins).astype(int), bins - 1)
    counts = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore"):
        mean_p = np.bincount(which, weights=p, minlength=bins) / counts
        accuracy = np.bincount(which, weights=hit, minlength=bins) / counts
    ece = float(np.nansum(counts / p.size * np.abs(accuracy - mean_p)))
    return np.linspace(0.0, 1.0, bins + 1), counts, mean_p, accuracy, ece


def calibration(bundle: Any, pairs: Sequence[tuple[str, str]], bins: int = 10,
                on_batch: Callable[[int], None] | None = None) -> Calibration:
    """The model's reliability on (source, reference) pairs, teacher forced (core.score, batched; on_batch(n) after
    each batch of n pairs). Pairs with an empty source score nothing and are left out."""
    scores = [s for s in score(bundle, [s for s, _ in pairs], [t for _, t in pairs], top_k=1, on_batch=on_batch)
              if s.token_logprobs]
    if not scores:
        raise ValueError("nothing to score: no pair has a source with tokens")
    confidence = [top[0][1] for s in scores for top in s.alternatives]
    correct = [rank == 1 for s in scores for rank in s.ranks]
    logprobs = [lp for s in scores for lp in s.token_logprobs]
    edges, counts, mean_p, accuracy, ece = reliability(confidence, correct, bins)
    return Calibration(edges, counts, mean_p, accuracy, ece, math.exp(-math.fsum(logprobs) / len(logprobs)),
                       float(np.mean(correct)), float(np.mean(confidence)), len(logprobs), len(scores))


@dataclass
class SmoothingComparison:
    """One model of a comparison: its ε_ls, as its checkpoint records it (None: not recorded), its calibration,
    and its BLEU on the same pairs."""

    name: str
    label_smoothing: float | None
    calibration: Calibration
    bleu: EvalResult


def label_smoothing_of(bundle: Any) -> float | None:
    """ε_ls the model was trained with, from its checkpoint's training settings (None: not recorded)."""
    train = getattr(bundle, "info", {}).get("train")
    value = train.get("label_smoothing") if isinstance(train, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare_calibration(bundles: Sequence[Any], pairs: Sequence[tuple[str, str]], options: DecodeOptions = GREEDY,
                        bins: int = 10, on_batch: Callable[[int], None] | None = None) -> list[SmoothingComparison]:
    """Each model's calibration, perplexity and BLEU (translated by options, greedy by default) on the same pairs:
    section 5.4's claim where the models differ in ε_ls alone (e.g. bench/table3.py's base and D-nols runs).
    on_batch(n) after each batch of n pairs scored or translated, 2 · len(pairs) per model."""
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    compared = []
    for bundle in bundles:
        reliable = calibration(bundle, pairs, bins, on_batch)
        translations = translate_detailed(bundle, sources, options, on_batch=on_batch)
        compared.append(SmoothingComparison(getattr(bundle, "name", "model"), label_smoothing_of(bundle), reliable,
                                            evaluate_bleu([t.text for t in translations], references)))
    return compared
