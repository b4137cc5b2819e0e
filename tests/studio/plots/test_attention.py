"""The Translate, Attention and Beam search tabs' figures (studio/plots/attention.py): the Translate tab's
probability figure is written straight as JSON (plots.token_probabilities_json), equal to plotly's own
(plots.token_probabilities), the reference; the attention grid names the tokens on hover unless that would
swamp the page."""
from __future__ import annotations

import json

import numpy as np
import pytest

from studio import plots

CASES = {
    "sentencepiece tokens, a ceiling": (["\u2581A", "\u2581dog", "<eos>"], [-0.1, -0.7, -0.05], 0.9),
    "word tokens, no ceiling": (["a", "<eos>"], [-0.2, -0.9], None),
    "nothing decoded": ([], [], 0.91),
    "nothing decoded, no ceiling": ([], [], None),
    "a long output: one label in two": (["\u2581x", "y<b>"] * 40, [-0.3, -1.2] * 40, 0.8),
    "markup in a token": (["<script>", "&amp;", "<eos>"], [-0.01, -2.0, -0.5], 0.95),
}


@pytest.mark.parametrize("tokens, logprobs, ceiling", CASES.values(), ids=CASES.keys())
def test_written_json_is_plotlys_figure(tokens, logprobs, ceiling):
    reference = json.loads(plots.token_probabilities(tokens, logprobs, ceiling).to_json())
    written = plots.token_probabilities_json(tokens, logprobs, ceiling)
    assert json.loads(written) == reference


def test_a_new_ceiling_is_not_served_from_another_models_layout():
    first = json.loads(plots.token_probabilities_json(["a"], [-0.1], 0.5))
    second = json.loads(plots.token_probabilities_json(["a"], [-0.1], 0.75))
    assert first["layout"]["shapes"][0]["y0"] == 0.5 and second["layout"]["shapes"][0]["y0"] == 0.75


def test_attention_grid_names_tokens_on_hover_unless_that_would_swamp_the_page():
    heads = ["H1", "H2", "H3", "H4"]
    letters = list("abcdefghijklmnopqrst")
    small = plots.attention_grid(np.random.rand(3, 4, 20, 20), letters, letters, "t", heads)
    assert small.data[0].customdata[0][0] == "L1 H1: a → a" and "customdata" in small.data[0].hovertemplate
    tokens = [f"t{i}" for i in range(256)]
    long = plots.attention_grid(np.random.rand(3, 4, 256, 256), tokens, tokens, "t", heads)
    assert long.data[0].customdata is None and len(long.to_json()) < 8e6  # was 28 MB with a label per cell
