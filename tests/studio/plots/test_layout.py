"""What every figure shares (studio/plots/layout.py): long titles wrap for a phone outside tags, and each figure
carries its phone layout."""
from __future__ import annotations

import re

import numpy as np
import pytest
from plotly.subplots import make_subplots

from studio import plots


def test_long_titles_wrap_for_a_phone_outside_tags():
    marked = plots.label("\u2581word")  # the grey word-start marker's <span style="...">
    wrapped = plots.wrap(f"Probability of each output token (orange: below 0.5; {marked} starts a word)")
    lines = wrapped.split("<br>")
    assert len(lines) == 3 and all(len(re.sub(r"<[^>]+>", "", line)) <= plots.NARROW_CHARS for line in lines)
    assert marked in wrapped  # no break inside the span's tag
    assert plots.wrap("Short title") == "Short title"
    assert plots.wrap("Encoder self-attention<br>every layer (rows) × head") == \
        "Encoder self-attention<br>every layer (rows) × head"  # lines of its own, each short enough, kept
    with pytest.raises(ValueError, match="a title for each of the 2 panels"):
        plots.stacked(make_subplots(rows=1, cols=2, subplot_titles=["Loss", ""]), 1, 2, 600, vertical_spacing=0.1)


def test_figures_carry_their_phone_layout():
    figure = plots.token_probabilities(["\u2581A", "\u2581dog", "<eos>"], [-0.1, -0.7, -0.05])
    narrow = figure.layout.meta["narrow"]
    assert "<br>" in narrow["title.text"] and narrow["font.size"] == plots.NARROW_FONT
    assert narrow["margin.t"] == plots.title_room(figure.layout.title.text)  # room for its lines below Gradio's label
    masks = plots.masks([["a", "b"], ["c"]], np.array([[False, False], [False, True]]), ["x", "y"])
    narrow = masks.layout.meta["narrow"]  # the two masks one above the other, each the column's width
    assert narrow["xaxis.domain"] == narrow["xaxis2.domain"] == [0.0, 1.0]
    assert narrow["yaxis2.domain"][1] < narrow["yaxis.domain"][0]
    assert narrow["annotations[1].y"] == narrow["yaxis2.domain"][1]  # the second title above its panel
    shares = plots.parameter_shares({"Embeddings": 2_048_000, "Decoder masked self-attention": 789_504})
    narrow = shares.layout.meta["narrow"]  # long part names on two lines, in a margin a phone can spare
    assert narrow["yaxis.ticktext"][0] == "Decoder masked<br>self-attention" and narrow["margin.l"] < 120
    smoothing = plots.label_smoothing(np.array([0.9, 0.05, 0.05]), ["a", "b", "c"], 0, 0.1)
    assert smoothing.layout.meta["narrow"]["data[0].textangle"] == -90  # each value up its bar, in legible type
    head = plots.attention_head(np.eye(3), ["a", "b", "c"], ["x", "y", "z"], "t", "query", "key")
    narrow = head.layout.meta["narrow"]  # a slim colour bar and upright labels: the map keeps the phone's width
    assert narrow["data[0].colorbar.thickness"] < 15 and narrow["xaxis.tickangle"] == -90
    assert head.data[0].colorbar.thickness is None  # the wide page's bar as plotly draws it
