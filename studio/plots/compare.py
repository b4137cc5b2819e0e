"""The Compare tab's figures: two models' output-token probabilities one above the other, their
cross-attention maps side by side on one colour scale, and our Table 3 beside the paper's.

Model A is drawn in blue and model B in orange throughout the tab (Okabe and Ito's pair, which reads
apart to the common colour-blindnesses); the same colours mark the words only one translation has.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from .attention import ATTENTION_SCALE
from .layout import hover_text, label, narrow, stacked, styled, token_axis, word_start_note, wrap

COLOURS = {"A": "#0072b2", "B": "#e69f00"}  # model A, model B
PAPER_COLOUR = "#999999"


def _titles(texts: Sequence[str], xs: Sequence[float], ys: Sequence[float]) -> list[dict]:
    """Panel titles as paper annotations, each centred above its panel."""
    return [dict(text=text, x=x, xref="paper", xanchor="center", y=y, yref="paper", yanchor="bottom",
                 showarrow=False, font=dict(size=15)) for text, x, y in zip(texts, xs, ys)]


def probabilities_pair(sides: Sequence[tuple[str, Sequence[str], Sequence[float]]], title: str) -> go.Figure:
    """sides: (model name, output tokens with <eos>, their probabilities) for A and B: a bar per token, A's
    panel above B's (each model writes its own tokens, so each has its own token axis)."""
    data, layout, names = [], {}, []
    for i, (which, (name, tokens, probs)) in enumerate(zip("AB", sides)):
        suffix = "" if i == 0 else "2"
        low, high = (0.64, 1.0) if i == 0 else (0.0, 0.34)  # apart: A's slanted token labels reached B's title
        data.append(dict(type="bar", x=list(range(len(tokens))), y=list(probs), name=f"{which}: {name}",
                         marker_color=COLOURS[which], customdata=[hover_text(t) for t in tokens],
                         xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                         hovertemplate="%{customdata}<br>p = %{y:.3f}<extra>" + which + "</extra>"))
        layout[f"xaxis{suffix}"] = {**token_axis(tokens, tickangle=-45), "anchor": f"y{suffix}", "domain": [0, 1]}
        layout[f"yaxis{suffix}"] = dict(range=[0, 1.02], title="p", anchor=f"x{suffix}", domain=[low, high])
        names.append(f"Model {which}: {label(name)}")
    tokens = [t for _, side_tokens, _ in sides for t in side_tokens]
    fig = go.Figure(data=data, layout=dict(**layout, showlegend=False,
                                           annotations=_titles(names, (0.5, 0.5), (1.0, 0.34))))
    styled(fig, title + word_start_note(tokens), 600, margin=dict(l=60, r=20, t=80, b=90))
    narrow(fig, **{f"annotations[{i}].text": wrap(text) for i, text in enumerate(names)})
    return fig


def cross_attention_pair(maps: Sequence[tuple[np.ndarray, Sequence[str], Sequence[str], str]],
                         title: str) -> go.Figure:
    """maps: (weights (target, source), target tokens, source tokens, panel title) for A and B: two
    heatmaps side by side on ONE colour scale, from 0 to the larger of the two maps' largest weight, so that
    a colour means the same weight in both."""
    top = max(float(np.max(m[0])) if np.size(m[0]) else 0.0 for m in maps) or 1.0
    data, layout = [], {}
    for i, (weights, rows, cols, _) in enumerate(maps):
        suffix = "" if i == 0 else "2"
        cells = np.array([[f"{hover_text(t)} ← {hover_text(s)}" for s in cols] for t in rows], dtype=object)
        data.append(dict(type="heatmap", z=weights, colorscale=ATTENTION_SCALE, zmin=0.0, zmax=top,
                         showscale=i == 1, colorbar=dict(thickness=10, title="weight"), customdata=cells,
                         xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                         hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>"))
        domain = [0, 0.43] if i == 0 else [0.55, 0.98]
        layout[f"xaxis{suffix}"] = {**token_axis(cols, max_labels=30, tickangle=-45, title="source token"),
                                    "domain": domain, "anchor": f"y{suffix}", "showgrid": False}
        layout[f"yaxis{suffix}"] = {**token_axis(rows, max_labels=40, autorange="reversed"), "anchor": f"x{suffix}",
                                    "domain": [0, 1], "showgrid": False, "title": "output token" if i == 0 else ""}
    titles = [m[3] for m in maps]
    fig = go.Figure(data=data, layout=dict(**layout, annotations=_titles(titles, (0.215, 0.765), (1.0, 1.0))))
    height = int(min(900, max(420, 180 + 24 * max(len(m[1]) for m in maps))))
    styled(fig, title, height, margin=dict(l=110, r=40, t=100, b=100))
    # On a phone one map above the other, each with its own labels.
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.2, titles=[wrap(t) for t in titles])
    narrow(fig, **{"data[1].colorbar.len": 0.4, "data[1].colorbar.y": 0.0, "data[1].colorbar.yanchor": "bottom",
                   "margin.l": 70, "margin.r": 10})
    return fig


def table3(rows: Sequence[dict[str, Any]], title: str) -> go.Figure:
    """Our Table 3 (bench/table3.py's docs/table3.csv): dev BLEU and dev perplexity per variant, a bar each,
    beside the paper's figure for the analogous change (grey), left and right."""
    names = [str(r["name"]) for r in rows]
    y = list(range(len(rows)))
    data = []
    reach = {}  # per metric the longest bar, and room beyond it for the figures written after the bars
    for i, (metric, axis, digits) in enumerate((("bleu", "", 1), ("perplexity", "2", 2))):
        for who, key, colour, offset in (("ours (Multi30k dev)", f"dev_{metric}", COLOURS["A"], -0.2),
                                         ("paper (newstest2013 dev)", f"paper_{metric}", PAPER_COLOUR, 0.2)):
            values = [r.get(key) for r in rows]
            reach[metric] = max([reach.get(metric, 0.0)] + [v for v in values if v is not None])
            data.append(dict(type="bar", orientation="h", x=values, y=[v + offset for v in y], width=0.38,
                             name=who, legendgroup=who, showlegend=i == 0, marker_color=colour,
                             text=[f"{v:.{digits}f}" if v is not None else "" for v in values],
                             textposition="outside", cliponaxis=False,
                             customdata=[label(n) for n in names], xaxis=f"x{axis}", yaxis=f"y{axis}",
                             hovertemplate="%{customdata}: %{x:.2f}<extra>" + who + "</extra>"))
    y_axis = dict(tickmode="array", tickvals=y, ticktext=[label(n) for n in names], autorange="reversed",
                  showgrid=False)
    layout = dict(xaxis=dict(domain=[0, 0.45], anchor="y", title="dev BLEU (higher is better)",
                             range=[0, 1.18 * (reach["bleu"] or 1)]),
                  xaxis2=dict(domain=[0.55, 1], anchor="y2", title="dev perplexity (lower is better)",
                              range=[0, 1.18 * (reach["perplexity"] or 1)]),
                  yaxis={**y_axis, "anchor": "x", "domain": [0, 1]},
                  yaxis2={**y_axis, "anchor": "x2", "domain": [0, 1], "matches": "y", "showticklabels": False},
                  # The legend at the figure's foot, under the axis titles (in the plot's coordinates it met them).
                  legend=dict(orientation="h", x=0, y=0, yref="container", yanchor="bottom"), barmode="overlay",
                  annotations=_titles(["BLEU", "Perplexity"], (0.225, 0.775), (1.0, 1.0)))
    fig = go.Figure(data=data, layout=layout)
    height = max(360, 160 + 34 * len(rows))
    styled(fig, title, height, margin=dict(l=100, r=30, t=80, b=120))
    # On a phone one panel above the other: the axis titles' words go into the panels' titles, which they met.
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.15,
            titles=["dev BLEU (higher is better)", "dev perplexity (lower is better)"])
    narrow(fig, **{"xaxis.title.text": "", "xaxis2.title.text": ""})
    return fig
