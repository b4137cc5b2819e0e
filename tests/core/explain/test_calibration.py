"""Section 5.4's label smoothing claim, measured (core/explain/calibration.py): reliability bins and the expected
calibration error from their definitions, a model's calibration on sentence pairs agreeing with core.score, and a
two-model comparison with perplexity and BLEU."""
from __future__ import annotations

import math

import numpy as np
import pytest

import core
from core.explain.calibration import calibration, compare_calibration, label_smoothing_of, reliability

PAIRS = [("Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."),
         ("Ein Mann fährt Fahrrad.", "A man rides a bike."),
         ("Eine Frau sitzt auf einer Bank.", "A woman sits on a bench."),
         ("", "Nothing to read.")]


def test_reliability_bins_by_confidence_and_weighs_the_gaps():
    edges, counts, confidence, accuracy, ece = reliability([0.05, 0.95, 0.95, 1.0, 0.5], [0, 1, 0, 1, 1], bins=10)
    assert np.allclose(edges, np.linspace(0, 1, 11)) and counts.tolist() == [1, 0, 0, 0, 0, 1, 0, 0, 0, 3]
    assert confidence[-1] == pytest.approx((0.95 + 0.95 + 1.0) / 3) and accuracy[-1] == pytest.approx(2 / 3)
    assert math.isnan(confidence[1]) and math.isnan(accuracy[1])
    expected = (1 * 0.05 + 1 * 0.5 + 3 * abs(2 / 3 - 2.9 / 3)) / 5
    assert ece == pytest.approx(expected)
    assert reliability([1.0, 1.0], [1, 1])[4] == 0  # sure and right: calibrated
    with pytest.raises(ValueError, match="bins"):
        reliability([0.5], [1], bins=0)


def test_a_models_calibration_is_its_scores(shipped):
    c = calibration(shipped, PAIRS, bins=5)
    scores = core.score(shipped, [s for s, _ in PAIRS[:3]], [t for _, t in PAIRS[:3]], top_k=1)
    logprobs = [lp for s in scores for lp in s.token_logprobs]
    assert c.sentences == 3 and c.tokens == len(logprobs) == c.counts.sum()
    assert c.perplexity == pytest.approx(math.exp(-sum(logprobs) / len(logprobs)))
    assert c.top1 == pytest.approx(np.mean([r == 1 for s in scores for r in s.ranks]))
    assert 0 <= c.ece <= 1 and 0 < c.mean_confidence <= 1


def test_two_models_compared_with_their_label_smoothing_perplexity_and_bleu(shipped, numbers):
    seen = []
    a, b = compare_calibration([shipped, shipped], PAIRS[:3], on_batch=seen.append)
    assert a.label_smoothing == label_smoothing_of(shipped) == 0.1 and a.name == "multi30k-de-en-small"
    assert a.calibration.ece == b.calibration.ece and a.bleu.bleu == b.bleu.bleu > 10
    assert sum(seen) == 2 * 2 * 3
    assert label_smoothing_of(numbers) is not None
