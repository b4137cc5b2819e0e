"""The Translate, Attention and Beam search tabs' token and attention figures: each output
token's probability, attention maps (every layer and head as a grid, one head large) and the
cross-attention behind one beam search choice."""
from __future__ import annotations

import functools
import json
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.io.json import to_json_plotly

from .layout import (NARROW_FONT, TITLE_TOP, hover_text, label, narrow, styled, title_room, token_axis,
                     word_start_note, wrap)

ATTENTION_SCALE = "Blues"


# ----- Translate ------------------------------------------------------------------------
def _probability_bars(tokens: Sequence[str], logprobs: Sequence[float]) -> dict:
    """The bars of token_probabilities, as plotly's figure dictionary writes a bar trace."""
    probs = np.exp(np.asarray(logprobs, dtype=float))
    labels = [hover_text(t) for t in tokens]
    bars = dict(type="bar", x=list(range(len(tokens))), y=probs.tolist(),
                marker=dict(color=np.where(probs < 0.5, "#d95f02", "#1b6ca8").tolist()),
                hovertemplate="%{customdata[0]}<br>p = %{y:.3f}<br>log p = %{customdata[1]}<extra></extra>")
    if len(tokens):
        bars["customdata"] = [[t, f"{lp:.3f}"] for t, lp in zip(labels, logprobs)]
    return bars


def token_probabilities(tokens: Sequence[str], logprobs: Sequence[float], ceiling: float | None = None) -> go.Figure:
    """One bar per output token: the probability the model gave it when it was chosen. ceiling: the
    probability label smoothing trained the model to give the right word (1 - eps + eps/V), drawn as a
    line: a student asks why a model sure of every word stops near 0.9."""
    fig = go.Figure(go.Bar({k: v for k, v in _probability_bars(tokens, logprobs).items() if k != "type"}))
    fig.update_xaxes(token_axis(tokens, tickangle=-45))
    fig.update_yaxes(range=[0, 1.02], title="p(token | prefix, source)")
    title = f"Probability of each output token (orange: below 0.5{word_start_note(tokens)})"
    styled(fig, title, 380)
    if ceiling is not None:
        # The note above the plot, right-aligned: by the line, a sure model's bars (most above 0.9) covered it.
        note = f"dashed: {ceiling:.2f}, label smoothing's target (5.4)"
        fig.add_hline(y=ceiling, line=dict(color="#777", width=1, dash="dash"))
        fig.add_annotation(text=note, xref="paper", yref="paper", x=1, y=1.01, xanchor="right", yanchor="bottom",
                           showarrow=False, font=dict(size=12, color="#555"))
        # On a phone the title takes the whole width: the note joins it, on a line of its own.
        both = f"{title}<br>{note}"
        narrow(fig, **{"annotations[0].visible": False, "title.text": wrap(both), "title.y": 1,
                       "title.yref": "container", "title.yanchor": "top", "title.pad.t": TITLE_TOP,
                       "margin.t": title_room(both)})
    return fig


@functools.lru_cache(maxsize=64)
def _probability_layout(word_note: str, ceiling: float | None) -> str:
    """token_probabilities' layout for a title's word note and a ceiling, as JSON: all that plotly's
    validation is needed for, built once per pair (a model has one ceiling; the note is one of two)."""
    tokens = ["\u2581"] if word_note else []  # a token that gives the title its note
    return json.dumps(token_probabilities(tokens, [0.0] * len(tokens), ceiling).to_plotly_json()["layout"])


def token_probabilities_json(tokens: Sequence[str], logprobs: Sequence[float], ceiling: float | None = None) -> str:
    """token_probabilities' figure as plotly's JSON text (what gr.Plot sends; the Translate tab wraps it), in
    ~0.05 ms instead of ~16: plotly's validation of the layout (nearly all of the 16 ms, a third of a /translate
    request's CPU with forty visitors) runs once per title and ceiling; the bars and the token labels are written
    straight into the JSON. tests/studio/plots/test_attention.py proves it the same figure as
    token_probabilities'. No Gradio here: studio.plots stays importable without it (a notebook's views)."""
    layout = json.loads(_probability_layout(word_start_note(tokens), ceiling))
    layout["xaxis"].update(token_axis(tokens, tickangle=-45))
    figure = {"data": [_probability_bars(tokens, logprobs)], "layout": layout}
    return to_json_plotly(figure)


# ----- Attention ------------------------------------------------------------------------
def _pairs(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    """(Q, K) hover text "query → key" of an attention map."""
    r, c = [hover_text(t) for t in rows], [hover_text(t) for t in cols]
    return np.array([[f"{q} → {k}" for k in c] for q in r], dtype=object)


def _heatmap(weights: np.ndarray, rows: Sequence[str], cols: Sequence[str], showscale: bool) -> go.Heatmap:
    return go.Heatmap(z=weights, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=ATTENTION_SCALE,
                      zmin=0.0, zmax=1.0, showscale=showscale, customdata=_pairs(rows, cols),
                      colorbar=dict(title=dict(text="weight", side="top")) if showscale else None,
                      hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>")


# Beyond this many cells the grid's hover names no tokens (the large view below does): a label per cell
# made a 255-token source's encoder grid 28 MB of JSON, seconds to send and to draw.
GRID_HOVER_CELLS = 100_000

# On a phone, a colour bar slim enough to leave the map its width.
SLIM_COLORBAR = {"data[0].colorbar.thickness": 8, "data[0].colorbar.xpad": 4, "data[0].colorbar.tickvals": [0, 0.5, 1]}


# The grid's token labels: at most this many across its width (each ~22 px of a projector's ~1,050 px, upright:
# in presenter mode's type too), GRID_PHONE_LABELS on a phone (none where more); a block's rows take GRID_ROW_PX
# each, up to GRID_LAYER_PX a layer (past that, one row in k is labelled); a token longer than GRID_LABEL_CHARS is
# cut short (hover and the Download menu's numbers name it whole).
GRID_X_LABELS, GRID_PHONE_LABELS, GRID_ROW_PX, GRID_LAYER_PX, GRID_LABEL_CHARS = 48, 12, 16, 320, 8


def _short(token: str, chars: int = GRID_LABEL_CHARS) -> str:
    """A token as a tick label, at most chars characters ("…" for the rest)."""
    token = str(token)
    return label(token if len(token) <= chars else token[:chars - 1] + "…")


def _block_ticks(n_blocks: int, size: int, tokens: Sequence[str], every: int) -> tuple[list[int], list[str]]:
    """Tick positions and labels for every every-th token of each of n_blocks blocks of size cells, a blank cell
    between blocks."""
    shown = range(0, size, every)
    return ([b * (size + 1) + i for b in range(n_blocks) for i in shown],
            [_short(tokens[i]) for _ in range(n_blocks) for i in shown])


def _all_labels(fig: go.Figure, axis: str, positions: Sequence[int], tokens: Sequence[str]) -> None:
    """Every token of an axis whose ticks may name only some (one in k) or cut them short, whole, by position, in
    layout.meta["labels"]: the Download menu's CSV and JSON (static/downloads.js) name each number's tokens from it."""
    meta = dict(fig.layout.meta or {})
    meta["labels"] = {**meta.get("labels", {}), axis: [[p, hover_text(t)] for p, t in zip(positions, tokens)]}
    fig.update_layout(meta=meta)


def attention_grid(maps: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str,
                   column_names: Sequence[str], row_title: str = "query", col_title: str = "key") -> go.Figure:
    """maps (layers, columns, Q, K): a block per layer (rows) and head (columns), drawn as one
    heatmap with blank gaps between blocks (one trace renders far faster than a subplot each). Each
    block's tokens label the axes (the keys under each column, the queries beside each row: one in k
    where there are more than fit); the heads are named above the columns, the layers right of the rows."""
    n_layers, n_cols, q, k = maps.shape
    z = np.full((n_layers * (q + 1) - 1, n_cols * (k + 1) - 1), np.nan, dtype=np.float32)
    labelled = maps.size <= GRID_HOVER_CELLS
    hover = np.full(z.shape, "", dtype=object) if labelled else None
    pairs = _pairs(rows, cols) if labelled else None
    for li in range(n_layers):
        for h in range(n_cols):
            block = np.s_[li * (q + 1):li * (q + 1) + q, h * (k + 1):h * (k + 1) + k]
            z[block] = maps[li, h]
            if labelled:
                hover[block] = f"L{li + 1} {column_names[h]}: " + pairs
    template = ("%{customdata}<br>weight %{z:.3f}" if labelled else
                "weight %{z:.3f}<br>(tokens: in the large view below)") + "<extra></extra>"
    # The colour bar clear of the layers' names, which stand between it and the blocks.
    fig = go.Figure(go.Heatmap(z=z, customdata=hover, colorscale=ATTENTION_SCALE, zmin=0.0, zmax=1.0,
                               hoverongaps=False, hovertemplate=template,
                               colorbar=dict(x=1.0, xanchor="left", xpad=34, title=dict(text="weight", side="top"))))
    layer_px = int(min(GRID_LAYER_PX, max(190, GRID_ROW_PX * (q + 1) + 24)))
    x_every = math.ceil(n_cols * k / GRID_X_LABELS) if k else 1
    y_every = math.ceil(q / max(1, (layer_px - 24) // GRID_ROW_PX)) if q else 1
    x_vals, x_text = _block_ticks(n_cols, k, cols, x_every)
    y_vals, y_text = _block_ticks(n_layers, q, rows, y_every)
    x_title = col_title + (f" (one in {x_every} labelled)" if x_every > 1 else "")
    y_title = row_title + (f" (one in {y_every} labelled)" if y_every > 1 else "")
    fig.update_xaxes(tickmode="array", tickvals=x_vals, ticktext=x_text, tickangle=-90, title=x_title,
                     automargin=True, showgrid=False, zeroline=False)
    fig.update_yaxes(tickmode="array", tickvals=y_vals, ticktext=y_text, title=y_title, automargin=True,
                     autorange="reversed", showgrid=False, zeroline=False)
    names = [dict(text=name, x=h * (k + 1) + (k - 1) / 2, xref="x", y=1, yref="paper", yanchor="bottom",
                  showarrow=False, font=dict(size=14)) for h, name in enumerate(column_names)]
    names += [dict(text=f"layer {li + 1}", x=1, xref="paper", xanchor="left", xshift=6, y=li * (q + 1) + (q - 1) / 2,
                   yref="y", textangle=90, showarrow=False, font=dict(size=14)) for li in range(n_layers)]
    # Room below the blocks for the upright key labels (~8 px a character) and the axis title.
    longest = max((min(len(str(t)), GRID_LABEL_CHARS) for t in cols), default=1)
    bottom = 40 + 8 * longest
    styled(fig, title, 130 + layer_px * n_layers + bottom, margin=dict(l=80, r=30, t=110, b=bottom),
           annotations=names)
    # Two lines at the top of the figure, clear of the head names above the blocks (centred in the
    # margin, the title's second line touched "H1").
    fig.update_layout(title=dict(yref="container", y=1, yanchor="top", pad=dict(t=TITLE_TOP + 8)))
    # Every token whole, by position, for the Download menu's numbers (the ticks cut long ones short, or skip some).
    _all_labels(fig, "xaxis", [h * (k + 1) + i for h in range(n_cols) for i in range(k)], list(cols) * n_cols)
    _all_labels(fig, "yaxis", [li * (q + 1) + i for li in range(n_layers) for i in range(q)], list(rows) * n_layers)
    # On a phone the bar slim (it was as wide as a head), and the tokens named only where the blocks are wide
    # enough (the mean of the heads, a short sentence): with four heads their labels left ~30 px a block. The
    # layers' and heads' names stay; hover and the large view below name the tokens.
    phone = {}
    if n_cols * k > GRID_PHONE_LABELS:
        phone = {"xaxis.showticklabels": False, "yaxis.showticklabels": False, "yaxis.title.text": "",
                 "xaxis.title.text": "tokens: in the large view", "margin.l": 30, "margin.b": 40}
    narrow(fig, **{**SLIM_COLORBAR, "data[0].colorbar.xpad": 24, "margin.l": 55, "margin.r": 10, **phone},
           **{f"annotations[{i}].font.size": NARROW_FONT for i in range(len(names))})
    return fig


def attention_head(weights: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str,
                   row_title: str, col_title: str) -> go.Figure:
    """One (Q, K) map large, with every token labelled."""
    fig = go.Figure(_heatmap(weights, rows, cols, showscale=True))
    size = max(len(rows), len(cols))
    height = int(min(900, max(420, 140 + 28 * size)))
    # Slanted labels need ~28 px each in presenter mode's type, whose plot is no wider: 36 across a
    # projector's ~1,000 px (60 overprinted there on a 255-token source).
    fig.update_xaxes(token_axis(cols, max_labels=36, tickangle=-45, title=col_title))
    fig.update_yaxes(token_axis(rows, max_labels=(height - 150) // 16, title=row_title, autorange="reversed"))
    for axis, tokens in (("xaxis", cols), ("yaxis", rows)):
        if len(fig.layout[axis].tickvals) < len(tokens):  # one in k labelled: the Download menu names each
            _all_labels(fig, axis, range(len(tokens)), tokens)
    styled(fig, title, height, margin=dict(l=110, r=30, t=60, b=90))
    # On a phone a slim colour bar and upright source labels: the bar and its margins took a third of the
    # width, and 14 slanted labels overprinted in the 130 px left. (A bar across the bottom, placed in the
    # container, pushed the margins past the figure's height while its tab was hidden.)
    narrow(fig, **SLIM_COLORBAR, **{"margin.l": 40, "margin.r": 10, "xaxis.tickangle": -90})
    return fig


# ----- Beam search ------------------------------------------------------------------------
def cross_attention_rows(layers: Sequence[np.ndarray], source: Sequence[str], title: str) -> go.Figure:
    """layers: per decoder layer (heads, S). One row per layer and head, plus their mean on top."""
    rows = [np.mean([heads.mean(axis=0) for heads in layers], axis=0)]
    names = ["mean"]
    for i, layer in enumerate(layers):
        for h, weights in enumerate(layer):
            rows.append(weights)
            names.append(f"L{i + 1} H{h + 1}")
    fig = go.Figure(_heatmap(np.array(rows), names, source, showscale=True))
    fig.update_xaxes(token_axis(source, tickangle=-45, title="source token"))
    fig.update_yaxes(token_axis(names, autorange="reversed"))
    return styled(fig, title, int(max(320, 140 + 30 * len(rows))), margin=dict(l=80, r=30, t=60, b=80))
