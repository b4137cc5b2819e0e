"""Teacher forcing against free running (core/explain/free_running.py): the model's own greedy output, taken as the
reference, has no divergence and one score both ways; a reference it would not have written parts from its output
where it first differs, and after that the reference's words hardly fit the model's own prefix."""
from __future__ import annotations

import math

import numpy as np
import pytest

import core
from core.explain.free_running import free_running

SENTENCE = "Zwei Hunde spielen im Schnee."


def test_the_models_own_greedy_output_does_not_diverge(shipped):
    own = core.translate_detailed(shipped, [SENTENCE], core.DecodeOptions(method="greedy"))[0]
    for reference in (own.ids, own.text):
        f = free_running(shipped, SENTENCE, reference)
        assert f.diverges_at is None and f.said_there is None and f.greedy == f.reference
        assert np.array_equal(f.forced, f.free)
        assert f.forced_choice == f.reference  # after its own prefix, its top token is its own
        forced, free = f.log_probabilities
        assert forced == free


def test_a_reference_parts_from_the_models_output_where_they_first_differ(shipped):
    f = free_running(shipped, SENTENCE, "Two dogs are playing in the snow.")
    assert f.reference[:3] == ["▁Two", "▁dogs", "▁are"] and f.greedy[2] == "▁play"
    assert f.diverges_at == 2 and f.said_there == "▁play" and f.forced_choice[2] == "▁play"
    assert np.array_equal(f.forced[:3], f.free[:3])  # the same prefix up to there
    assert f.forced[3] > 0.5 > 100 * f.free[3]  # "playing" after "are", not after "play"
    assert math.isnan(f.free[-1])  # the greedy output ended before the reference's <eos>
    assert f.log_probabilities[1] < f.log_probabilities[0]


def test_an_empty_source_is_refused(shipped):
    with pytest.raises(ValueError, match="source is empty"):
        free_running(shipped, "", "Two dogs.")
