"""The Saliency tab's figures: an attribution map beside the cross-attention, on the same axes (target
tokens down, source tokens across), and their agreement per target token (core.explain.saliency.compare:
whether the most-attributed source token is the most-attended one, and the attention each gets).

Attributions are signed: PuOr (ColorBrewer's purple-orange, colour-blind safe) centred on 0, purple
where a source token raised the target token's probability, orange where it lowered it; the map says so
under its heading and at its colour bar's ends.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from core.explain.saliency import Agreement

from .arithmetic import SIGNED_SCALE
from .attention import ATTENTION_SCALE
from .layout import LINE_PX, empty, hover_text, label, narrow, stacked, styled, token_axis, wrap

PURPLE, ORANGE = "#5e3c99", "#e66101"  # PuOr's ends
# The sign convention, under the attribution map's heading.
SIGN_LEGEND = (f'<span style="color:{PURPLE}">■ purple</span>: raised p(target token) · '
               f'<span style="color:{ORANGE}">■ orange</span>: lowered it')
AGREE, DISAGREE = "#08519c", "#9ecae1"  # Blues (the attention's scale): dark where the two maps agree
TICK = "#d62728"  # the most-attended token's share: red, seen on white, on the dark theme and on either blue


def _cells(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    """Hover text per cell: "target token ← source token"."""
    r, c = [hover_text(t) for t in rows], [hover_text(t) for t in cols]
    return np.array([[f"{t} ← {s}" for s in c] for t in r], dtype=object)


def saliency_maps(attribution: np.ndarray, attention: np.ndarray, source: Sequence[str], target: Sequence[str],
                  method: str, title: str) -> go.Figure:
    """Two heatmaps side by side (one above the other on a phone), rows the target tokens with <eos>,
    columns the source tokens with <eos>. Laid out here rather than by make_subplots (3 times as fast)."""
    reach = float(np.abs(attribution).max()) or 1.0
    cells = _cells(target, source)
    titles = [f"Attribution: {method}<br><span style=\"font-size:12px\">{SIGN_LEGEND}</span>",
              "Cross-attention, mean of all layers and heads"]
    x_axis = {**token_axis(source, max_labels=30, tickangle=-45, title="source token"), "showgrid": False}
    y_axis = {**token_axis(target, max_labels=40, autorange="reversed"), "showgrid": False}
    data = [dict(type="heatmap", z=attribution, colorscale=SIGNED_SCALE, zmin=-reach, zmax=reach, zmid=0,
                 customdata=cells, colorbar=dict(x=0.37, thickness=10, title="share", tickvals=[-reach, 0, reach],
                                                 ticktext=[f"−{reach:.2f} lowered", "0", f"+{reach:.2f} raised"]),
                 hovertemplate="%{customdata}<br>attribution %{z:.3f}<extra></extra>"),
            dict(type="heatmap", z=attention, colorscale=ATTENTION_SCALE, zmin=0, zmax=1, customdata=cells,
                 colorbar=dict(x=0.94, thickness=10, title="weight"), xaxis="x2", yaxis="y2",
                 hovertemplate="%{customdata}<br>attention %{z:.3f}<extra></extra>")]
    layout = dict(xaxis={**x_axis, "domain": [0, 0.36], "anchor": "y"},
                  xaxis2={**x_axis, "domain": [0.57, 0.93], "anchor": "y2"},
                  # Domains given, not left to plotly: a phone's layout, undone on a wide page, puts them back.
                  yaxis={**y_axis, "anchor": "x", "domain": [0, 1], "title": "target token"},
                  yaxis2={**y_axis, "anchor": "x2", "domain": [0, 1], "matches": "y", "showticklabels": False},
                  annotations=[dict(text=text, x=x, xref="paper", xanchor="center", y=1, yref="paper",
                                    yanchor="bottom", showarrow=False, font=dict(size=16))
                               for text, x in zip(titles, (0.18, 0.75))])
    fig = go.Figure(data=data, layout=layout)
    height = int(min(900, max(420, 170 + 24 * len(target))))
    styled(fig, title, height, margin=dict(l=110, r=40, t=110, b=100))
    # On a phone one map above the other, each with its colour bar beside it and its own token labels.
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.2, titles=[wrap(titles[0]), "Cross-attention (mean)"])
    bars = {f"data[{i}].colorbar.{key}": value for i, y in ((0, 1.0), (1, 0.0))
            for key, value in (("x", 1.0), ("y", y), ("yanchor", "top" if y else "bottom"), ("len", 0.4),
                               ("title.text", ""))}
    # The heading and its sign legend take two lines more there than here: the plots lower by as many.
    top = fig.layout.meta["narrow"].get("margin.t", fig.layout.margin.t) + 2 * LINE_PX
    narrow(fig, **bars, **{"yaxis2.showticklabels": True, "margin.l": 70, "margin.r": 10, "margin.t": top})
    return fig


def agreement_bars(compared: Agreement, source: Sequence[str], target: Sequence[str], title: str) -> go.Figure:
    """Per target token compared (<eos> aside): a bar for the attention on its most-attributed source token (as a
    share of the attention on the source's words), dark where that token is also the most-attended one, light
    where not, and a tick at the most-attended token's share (the bar reaches it where the two agree)."""
    rows = np.flatnonzero(compared.measured)
    if not rows.size:
        return empty("Nothing to compare: no target token but <eos>, or no source word.", 340)
    names = [target[t] for t in rows]
    attributed = [source[compared.top_attributed[t]] for t in rows]
    attended = [source[compared.top_attended[t]] for t in rows]
    hover = [f"{hover_text(t)}: most attributed {hover_text(a)}, most attended {hover_text(w)}"
             for t, a, w in zip(names, attributed, attended)]
    agree = compared.top[rows] == 1
    fig = go.Figure()
    for wanted, colour, name in ((True, AGREE, "most-attributed = most-attended"),
                                 (False, DISAGREE, "most-attributed ≠ most-attended")):
        picked = np.flatnonzero(agree == wanted)
        fig.add_trace(go.Bar(x=picked, y=compared.share[rows][picked], name=name, marker_color=colour,
                             text=[label(attributed[i]) for i in picked], textposition="inside", insidetextanchor="end",
                             textangle=0, customdata=[hover[i] for i in picked],
                             hovertemplate="%{customdata}<br>attention on the most-attributed %{y:.2f}<extra></extra>"))
    # The tick names the most-attended token where it is another than the bar's.
    fig.add_trace(go.Scatter(x=np.arange(rows.size), y=compared.top_share[rows], mode="markers+text",
                             text=["" if same else label(w) for same, w in zip(agree, attended)],
                             textposition="top center", textfont=dict(size=12, color=TICK),
                             name="attention on the most-attended", customdata=hover,
                             marker=dict(symbol="line-ew-open", size=26, color=TICK, line=dict(width=3)),
                             hovertemplate="%{customdata}<br>attention on the most-attended %{y:.2f}<extra></extra>"))
    fig.update_layout(barmode="overlay", bargap=0.3, uniformtext=dict(minsize=9, mode="hide"),  # a label too wide: off
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", font=dict(size=12)))
    fig.update_xaxes(token_axis(names, tickangle=-45, title="target token"), range=[-0.6, rows.size - 0.4])
    fig.update_yaxes(range=[0, 1.05], title="attention share")
    styled(fig, title, 360, margin=dict(l=70, r=30, t=90, b=90))
    # On a phone the legend under the slanted token labels and the axis title, at the figure's foot.
    narrow(fig, **{"legend.yref": "container", "legend.y": 0, "legend.yanchor": "bottom", "margin.b": 170,
                   "height": 420})
    return fig
