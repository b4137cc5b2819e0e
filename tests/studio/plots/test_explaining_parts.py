"""The Knock out and Word choice tabs' figures (studio/plots/knockout.py, word_choice.py): what each draws, from
core's numbers of the shipped model's first views, and the layout each carries for a phone."""
from __future__ import annotations

import numpy as np
import pytest

from core.explain import contrast, free_running, knockout_effect, logit_lens
from core.explain.calibration import calibration
from studio.plots import knockout as K
from studio.plots import word_choice as W

SOURCE = "Zwei Hunde spielen im Schnee."


@pytest.fixture(scope="module")
def lens(shipped):
    return logit_lens(shipped, SOURCE)


def test_the_lens_grid_names_each_layers_token_and_bolds_the_one_written(lens):
    fig = W.logit_lens_map(lens, "Layer by layer")
    heat = fig.data[0]
    assert np.array(heat.z).shape == (3, len(lens.tokens))
    assert heat.text[-1][1] == "<b>␣dogs</b>".replace("␣", '<span style="color:#999">␣</span>')
    assert "layer 3 (output)" in fig.layout.yaxis.ticktext[-1]
    assert "narrow" in fig.layout.meta


def test_free_running_marks_where_the_prefixes_part(shipped):
    f = free_running(shipped, SOURCE, "Two dogs are playing in the snow.")
    fig = W.free_running_bars(f, "Teacher forcing against free running")
    assert [t.name.split(":")[0] for t in fig.data] == ["teacher forcing", "free running"]
    assert fig.layout.shapes[0].x0 == 1.5 and "wrote" in fig.layout.annotations[0].text
    assert fig.data[1].y[-1] == 0  # the greedy output had stopped: no bar


def test_contrast_reliability_and_knock_out_figures(shipped):
    c = contrast(shipped, SOURCE, 1, "cat")
    fig = W.contrast_bars(c, "Why dogs and not cat")
    assert len(fig.data[0].y) == len(c.source_tokens) and "narrow" in fig.layout.meta
    reliable = calibration(shipped, [(SOURCE, "Two dogs play in the snow."), ("Ein Hund.", "A dog.")])
    fig = W.reliability_diagram([("A", reliable), ("B", reliable)], "Calibration")
    assert fig.data[0].name.startswith("A: ECE") and fig.data[-1].name.startswith("calibrated")
    e = knockout_effect(shipped, SOURCE, positions=False)
    fig = K.probabilities_before_after(e.tokens, e.probabilities_before, e.probabilities_after, "p")
    assert [t.name for t in fig.data] == ["intact", "knocked out"]
    fig = K.attention_before_after(e.attention_before.mean(0), e.attention_after.mean(0), e.query_tokens,
                                   e.key_tokens, "encoder layer 1", "a")
    assert fig.data[0].zmax == fig.data[1].zmax and "xaxis2.domain" in fig.layout.meta["narrow"]
    fig = K.corpus_before_after({"bleu": 37.0, "chrf": 56.2}, {"bleu": 5.1, "chrf": 28.1}, "corpus")
    assert list(fig.data[1].text) == ["5.1", "28.1"]
