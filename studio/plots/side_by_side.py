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


def table3(rows: Sequence[dict[str, Any]], title: str) -> go.Figure | None:
    """Our Table 3 (bench/table3.py's docs/table3.csv) as each variant's change from its base, dev BLEU left and
    dev perplexity right, ours beside the paper's for the analogous change (grey). The shaded band is the two
    base seeds' difference: a change inside it is no bigger than the noise. Absolute values do not compare
    (our perplexity is per token of an 8k BPE on Multi30k, the paper's per wordpiece of a 37k BPE on WMT), so
    they are only in the hover. None before the base is scored."""
    base = next((r for r in rows if r.get("name") == "base"), None)
    if base is None:
        return None
    seed = next((r for r in rows if r.get("name") == "base-seed1"), None)
    shown = [r for r in rows if r is not base]
    names = [str(r["name"]) for r in shown]
    y = list(range(len(shown)))
    data, shapes, reach = [], [], {}
    for i, (metric, axis, digits) in enumerate((("bleu", "", 1), ("perplexity", "2", 2))):
        for who, key, colour, offset in (("ours (Multi30k dev)", f"dev_{metric}", COLOURS["A"], -0.2),
                                         ("paper (newstest2013 dev)", f"paper_{metric}", PAPER_COLOUR, 0.2)):
            values = [_change(r.get(key), base.get(key)) for r in shown]
            low, high = reach.get(metric, (-1.0, 1.0))
            reach[metric] = (min([low] + [v for v in values if v is not None]),
                             max([high] + [v for v in values if v is not None]))
            data.append(dict(type="bar", orientation="h", x=values, y=[v + offset for v in y], width=0.38,
                             name=who, legendgroup=who, showlegend=i == 0, marker_color=colour,
                             text=[f"{v:+.{digits}f}" if v is not None else "" for v in values],
                             textposition="outside", cliponaxis=False, textfont=dict(size=13),
                             customdata=[[label(n), _absolute(r.get(key), digits)] for n, r in zip(names, shown)],
                             xaxis=f"x{axis}", yaxis=f"y{axis}",
                             hovertemplate="%{customdata[0]}: %{x:+.2f} from the base, %{customdata[1]}"
                                           f"<extra>{who}</extra>"))
        spread = _change((seed or {}).get(f"dev_{metric}"), base.get(f"dev_{metric}"))
        if spread:  # the noise band: as wide as two seeds of the same model differ
            # Its panel's height only (its y axis's domain): on a phone the panels stand one above the other.
            shapes.append(dict(type="rect", xref=f"x{axis}", yref=f"y{axis} domain", x0=-abs(spread),
                               x1=abs(spread), y0=0, y1=1, fillcolor="#dddddd", opacity=0.6, layer="below",
                               line_width=0))
    if shapes:  # a legend entry for the band: an empty trace drawn in its colour
        data.append(dict(type="bar", orientation="h", x=[None], y=[None], name="within the two base seeds' spread",
                         marker_color="#dddddd", showlegend=True, hoverinfo="skip"))
    y_axis = dict(tickmode="array", tickvals=y, ticktext=[label(n) for n in names], autorange="reversed",
                  showgrid=False)
    x_axis = dict(zeroline=True, zerolinecolor="#333", zerolinewidth=1)
    layout = dict(xaxis=dict(x_axis, domain=[0, 0.45], anchor="y", title="Δ dev BLEU from the base (higher is better)",
                             range=_padded(*reach["bleu"])),
                  xaxis2=dict(x_axis, domain=[0.55, 1], anchor="y2",
                              title="Δ dev perplexity from the base (lower is better)",
                              range=_padded(*reach["perplexity"])),
                  yaxis={**y_axis, "anchor": "x", "domain": [0, 1]},
                  yaxis2={**y_axis, "anchor": "x2", "domain": [0, 1], "matches": "y", "showticklabels": False},
                  # The legend at the figure's foot, under the axis titles (in the plot's coordinates it met them).
                  legend=dict(orientation="h", x=0, y=0, yref="container", yanchor="bottom"), barmode="overlay",
                  shapes=shapes, annotations=_titles(["BLEU", "Perplexity"], (0.225, 0.775), (1.0, 1.0)))
    fig = go.Figure(data=data, layout=layout)
    height = max(360, 160 + 44 * len(shown))  # rows tall enough for the figures by the bars
    styled(fig, title, height, margin=dict(l=100, r=30, t=80, b=120))
    # On a phone one panel above the other: the axis titles' words go into the panels' titles, which they met.
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.15,
            titles=["Δ dev BLEU (higher is better)", "Δ perplexity (lower is better)"])
    narrow(fig, **{"xaxis.title.text": "", "xaxis2.title.text": ""})
    return fig


def _padded(low: float, high: float) -> list[float]:
    """An axis range from low to high with room beyond each end for the figures written after the bars."""
    room = 0.25 * (high - low)
    return [low - room, high + room]


def _change(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base


def _absolute(value: float | None, digits: int) -> str:
    return "not in the paper" if value is None else f"value {value:.{digits}f}"
