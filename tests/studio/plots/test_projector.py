"""Numbers readable on a projector (issue 51): every heat strip of the Attention arithmetic tab has a colour
bar beside it (titled, its ends and 0 labelled; one bar for panels in one space), short strips print their
numbers, and the Attention tab's grid of every layer and head names the tokens on its axes; each keeps a
layout a phone can use. The Download menu's CSV and JSON (static/downloads.js) are tested in
browser/test_projector.py."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import core
from studio import plots
from studio.plots import arithmetic as arithmetic_plots
from studio.plots import attention as attention_plots
from tests.helpers.studio import SENTENCES, studio_bundle


@pytest.fixture(scope="module")
def figures() -> dict:
    """The three arithmetic figures for cross-attention, layer 1, head 1, the first target token's query."""
    bundle = studio_bundle()
    a = core.attention_arithmetic(bundle, SENTENCES[0], "Ein Hund rennt", "cross", 0, 0, 1)
    title = plots.arithmetic_title("studio-tiny", "Cross-attention", a, "a step")
    c = bundle.model.config
    return {"a": a, "query and keys": plots.query_and_keys(a, title),
            "weighted values": plots.weighted_values(a, title),
            "concat to output": plots.concat_to_output(a, c.n_heads, c.norm_first, title)}


def _bars(fig) -> dict[str, list[int]]:
    """Each colour axis of a figure: the indices of the traces drawn on it."""
    on: dict[str, list[int]] = {}
    for i, trace in enumerate(fig.data):
        on.setdefault(trace.coloraxis, []).append(i)
    return on


@pytest.mark.parametrize("name", ["query and keys", "weighted values", "concat to output"])
def test_every_arithmetic_heat_strip_has_a_titled_colour_bar_beside_it(figures, name):
    fig = figures[name]
    assert fig.data and all(t.type == "heatmap" for t in fig.data)
    for axis_name, traces in _bars(fig).items():
        assert axis_name, "a heat strip without a colour axis: no colour bar"
        axis = fig.layout[axis_name]
        bar = axis.colorbar
        assert axis.showscale is not False and bar.title.text  # drawn, and says what the colour is
        assert axis.cmin == 0 and axis.cmax == 1 or axis.cmid == 0 and axis.cmin == -axis.cmax  # 0 white
        values = np.concatenate([np.ravel(np.asarray(fig.data[i].z, dtype=float)) for i in traces])
        assert axis.cmin <= values.min() and values.max() <= axis.cmax
        assert bar.tickvals[0] == axis.cmin and bar.tickvals[-1] == axis.cmax  # its ends labelled...
        assert axis.cmin == 0 or 0 in bar.tickvals  # ... and 0 on a signed one
        assert "−" in bar.ticktext[0] or axis.cmin == 0
        # The bar spans its strips (from above the first one, where its title stands, to the last one's foot).
        domains = [fig.layout[f"yaxis{'' if i == 0 else i + 1}"].domain for i in traces]
        assert bar.y >= max(d[1] for d in domains) and bar.y - bar.len == pytest.approx(min(d[0] for d in domains))
        assert bar.yanchor == "top" and bar.lenmode == "fraction"


def test_strips_in_one_space_share_a_colour_bar_and_the_others_have_their_own(figures):
    a = figures["a"]
    names = {name: [fig.data[i].coloraxis for i in range(len(fig.data))]
             for name, fig in figures.items() if name != "a"}
    assert names["query and keys"] == ["coloraxis", "coloraxis2", "coloraxis2"]  # x; q with the keys
    assert names["weighted values"] == ["coloraxis", "coloraxis2", "coloraxis2"]  # w; the values with their sum
    assert names["concat to output"] == ["coloraxis", "coloraxis", "coloraxis2", "coloraxis2"]
    shared = figures["query and keys"].layout.coloraxis2
    assert shared.cmax == pytest.approx(max(np.abs(a.q).max(), np.abs(a.keys).max()))
    assert figures["weighted values"].layout.coloraxis.cmax == 1  # the weights: the Attention tab's scale
    # The figure's data stay where the tab's tests and the Download menu read them.
    np.testing.assert_allclose(np.asarray(figures["weighted values"].data[0].z)[0], a.weights)


def test_short_strips_print_their_numbers(figures):
    a = figures["a"]
    weights = figures["weighted values"].data[0]
    assert len(a.key_tokens) <= arithmetic_plots.PRINTED_WEIGHTS and weights.texttemplate == "%{z:.2f}"
    q = figures["query and keys"].data[1]  # the tiny model's d_k = 16: short enough
    assert a.q.shape[0] <= arithmetic_plots.PRINTED_CELLS and q.texttemplate == "%{z:.2f}"
    x = figures["query and keys"].data[0]  # d_model = 64 numbers: colours and the bar only
    assert a.x.shape[0] > arithmetic_plots.PRINTED_CELLS and x.texttemplate is None
    assert figures["query and keys"].data[2].texttemplate is None  # a key per row: no numbers in 16-px rows


def test_a_long_strip_prints_nothing_and_a_phone_prints_only_a_few(figures):
    a = figures["a"]
    long = plots.weighted_values(dataclasses.replace(a, weights=np.full(30, 1 / 30), key_tokens=[f"t{i}" for i in
                                                                                               range(30)],
                                                     values=np.zeros((30, a.q.shape[0]))), "t")
    assert long.data[0].texttemplate is None
    narrow = figures["weighted values"].layout.meta["narrow"]
    assert (narrow.get("data[0].texttemplate") == "") == (len(a.key_tokens) > arithmetic_plots.PHONE_CELLS)
    # On a phone slim bars, and the weights' upright tokens off (they ran into the title below; the rows of the
    # values name the same keys).
    assert narrow["coloraxis.colorbar.thickness"] < 14 and narrow["coloraxis2.colorbar.thickness"] < 14
    assert narrow["xaxis.showticklabels"] is False


def test_the_arithmetic_figures_keep_their_phone_layout(figures):
    for name in ("query and keys", "weighted values", "concat to output"):
        fig = figures[name]
        narrow = fig.layout.meta["narrow"]
        assert narrow["height"] > fig.layout.height - 140 and narrow["annotations[0].font.size"] == plots.NARROW_FONT
        assert all(f"{axis}.colorbar.xpad" in narrow for axis in _bars(fig))


# ----- the Attention tab's grid ------------------------------------------------------------------------------
SOURCE = ["\u2581Ein", "\u2581Hund", "\u2581Fahrradfahrerinnen", "<eos>"]
TARGET = ["<bos>", "\u2581A", "\u2581dog"]


def _grid(n_layers: int = 2, n_heads: int = 3, rows=TARGET, cols=SOURCE, **kwargs):
    maps = np.random.default_rng(0).random((n_layers, n_heads, len(rows), len(cols)))
    return plots.attention_grid(maps, rows, cols, "t<br>u", [f"H{h + 1}" for h in range(n_heads)], **kwargs)


def test_the_grid_names_every_token_on_its_axes():
    fig = _grid()
    x, y = fig.layout.xaxis, fig.layout.yaxis
    # Every head's block has its keys under it, every layer's its queries beside it, <eos> escaped (plotly would
    # read it as a tag and show nothing), the word-start marker shown, a long token cut short.
    assert list(x.tickvals) == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13]
    assert list(x.ticktext[:4]) == [plots.label("\u2581Ein"), plots.label("\u2581Hund"),
                                    plots.label("\u2581Fahrra…"), "&lt;eos&gt;"]
    assert list(x.ticktext) == list(x.ticktext[:4]) * 3
    assert list(y.tickvals) == [0, 1, 2, 4, 5, 6] and y.ticktext[0] == "&lt;bos&gt;" and "A" in y.ticktext[1]
    assert x.title.text == "key" and y.title.text == "query"
    # The heads named above their blocks, the layers beside theirs.
    names = [a.text for a in fig.layout.annotations]
    assert names == ["H1", "H2", "H3", "layer 1", "layer 2"]
    assert [a.x for a in fig.layout.annotations[:3]] == [1.5, 6.5, 11.5]
    assert [a.y for a in fig.layout.annotations[3:]] == [1, 5]
    assert fig.data[0].colorbar.title.text == "weight"
    # Every token whole, by position, for the Download menu (static/downloads.js).
    labels = dict(fig.layout.meta["labels"]["xaxis"])
    assert labels[2] == "\u2423Fahrradfahrerinnen" and labels[13] == "&lt;eos&gt;" and 4 not in labels
    assert dict(fig.layout.meta["labels"]["yaxis"])[4] == "&lt;bos&gt;"


def test_the_grid_takes_axis_titles_and_labels_one_token_in_k_where_all_would_crowd():
    keys = [f"k{i}" for i in range(30)]
    fig = _grid(2, 8, rows=[f"q{i}" for i in range(40)], cols=keys, row_title="query: decoder input",
                col_title="key: source token")
    every = int(np.ceil(8 * 30 / attention_plots.GRID_X_LABELS))
    assert fig.layout.xaxis.title.text == f"key: source token (one in {every} labelled)"
    assert len(fig.layout.xaxis.tickvals) == 8 * len(range(0, 30, every))
    assert "(one in" in fig.layout.yaxis.title.text
    assert fig.layout.height <= 130 + 2 * attention_plots.GRID_LAYER_PX + 200
    assert len(fig.layout.meta["labels"]["xaxis"]) == 8 * 30  # the numbers still name every key


def test_the_grid_keeps_a_phone_layout():
    narrow = _grid(2, 4).layout.meta["narrow"]
    assert narrow["data[0].colorbar.thickness"] < 15 and narrow["margin.l"] < 80
    # Four heads of four keys: too many labels for a phone's width; the blocks keep it, the large view names them.
    assert narrow["xaxis.showticklabels"] is False and narrow["yaxis.showticklabels"] is False
    mean = _grid(2, 1).layout.meta["narrow"]  # the mean of the heads: one block, its tokens fit (three heads too)
    assert "xaxis.showticklabels" not in mean and "yaxis.showticklabels" not in mean


def test_the_large_view_lists_every_token_where_its_ticks_name_one_in_k():
    keys = [f"t{i}" for i in range(100)]
    fig = plots.attention_head(np.zeros((3, 100)), ["a", "b", "c"], keys, "t", "query", "key")
    assert len(fig.layout.xaxis.tickvals) < 100 and dict(fig.layout.meta["labels"]["xaxis"])[99] == "t99"
    assert "yaxis" not in fig.layout.meta["labels"]  # every query labelled: its ticks say it all
    small = plots.attention_head(np.eye(3), ["a", "b", "c"], list("xyz"), "t", "q", "k")
    assert "labels" not in small.layout.meta and small.data[0].colorbar.title.text == "weight"
