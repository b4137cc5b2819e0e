"""The Knock out tab's figures: each token of the intact translation, its probability intact and with the part
knocked out; the attention that reads the part, before and after, on one colour scale; a corpus's BLEU and chrF
before and after. Intact is drawn in blue, knocked out in vermilion (Okabe and Ito's pair, apart to the common
colour-blindnesses) throughout the tab."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .attention import ATTENTION_SCALE
from .layout import hover_text, narrow, stacked, styled, token_axis, word_start_note, wrap

INTACT, KNOCKED = "#0072b2", "#d55e00"


def probabilities_before_after(tokens: Sequence[str], before: Sequence[float], after: Sequence[float],
                               title: str) -> go.Figure:
    """Two bars per token of the intact translation (<eos> included): its probability intact and knocked out,
    both teacher forced on the same tokens."""
    names = [hover_text(t) for t in tokens]
    fig = go.Figure([go.Bar(x=list(range(len(tokens))), y=list(values), name=name, marker_color=colour,
                            customdata=names, hovertemplate="%{customdata}<br>p = %{y:.3f}<extra>" + name + "</extra>")
                     for name, values, colour in (("intact", before, INTACT), ("knocked out", after, KNOCKED))])
    fig.update_layout(barmode="group", bargap=0.25,
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", font=dict(size=13)))
    fig.update_xaxes(token_axis(tokens, tickangle=-45, title="the intact translation's tokens"))
    fig.update_yaxes(range=[0, 1.02], title="p(token | prefix, source)")
    styled(fig, title + word_start_note(tokens), 400, margin=dict(l=70, r=30, t=90, b=100))
    narrow(fig, **{"legend.yref": "container", "legend.y": 0, "legend.yanchor": "bottom", "margin.b": 170,
                   "height": 460})
    return fig


def attention_before_after(before: np.ndarray, after: np.ndarray, rows: Sequence[str], cols: Sequence[str],
                           what: str, title: str) -> go.Figure:
    """The neighbour's weights (queries × keys, their heads' mean) intact beside knocked out, on one colour scale
    from 0 to the larger maximum (one above the other on a phone)."""
    top = float(max(np.max(before, initial=0), np.max(after, initial=0))) or 1.0
    cells = np.array([[f"{hover_text(r)} → {hover_text(c)}" for c in cols] for r in rows], dtype=object)
    titles = [f"intact: {what}", f"knocked out: {what}"]
    data, layout = [], {}
    for i, weights in enumerate((before, after)):
        suffix = "" if i == 0 else "2"
        data.append(dict(type="heatmap", z=weights, colorscale=ATTENTION_SCALE, zmin=0.0, zmax=top, customdata=cells,
                         showscale=i == 1, colorbar=dict(thickness=10, title="weight"), xaxis=f"x{suffix}",
                         yaxis=f"y{suffix}", hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>"))
        layout[f"xaxis{suffix}"] = {**token_axis(cols, max_labels=30, tickangle=-45, title="attends to"),
                                    "domain": [0, 0.43] if i == 0 else [0.55, 0.98], "anchor": f"y{suffix}",
                                    "showgrid": False}
        layout[f"yaxis{suffix}"] = {**token_axis(rows, max_labels=40, autorange="reversed"), "anchor": f"x{suffix}",
                                    "domain": [0, 1], "showgrid": False, "title": "query" if i == 0 else ""}
    layout["annotations"] = [dict(text=text, x=x, xref="paper", xanchor="center", y=1.0, yref="paper",
                                  yanchor="bottom", showarrow=False, font=dict(size=15))
                             for text, x in zip(titles, (0.215, 0.765))]
    fig = go.Figure(data=data, layout=layout)
    height = int(min(900, max(420, 180 + 24 * len(rows))))
    styled(fig, title, height, margin=dict(l=110, r=40, t=100, b=100))
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.2, titles=[wrap(t) for t in titles])
    narrow(fig, **{"data[1].colorbar.len": 0.4, "data[1].colorbar.y": 0.0, "data[1].colorbar.yanchor": "bottom",
                   "margin.l": 70, "margin.r": 10})
    return fig


def corpus_before_after(before: dict[str, float], after: dict[str, float], title: str) -> go.Figure:
    """BLEU and chrF (sacreBLEU, 0-100) intact and knocked out, a pair of bars each, the figures on them."""
    metrics = ["BLEU", "chrF"]
    fig = go.Figure([go.Bar(x=metrics, y=[scores["bleu"], scores["chrf"]], name=name, marker_color=colour,
                            text=[f"{scores['bleu']:.1f}", f"{scores['chrf']:.1f}"], textposition="outside",
                            cliponaxis=False, hovertemplate="%{x} %{y:.2f}<extra>" + name + "</extra>")
                     for name, scores, colour in (("intact", before, INTACT), ("knocked out", after, KNOCKED))])
    fig.update_layout(barmode="group", legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"))
    fig.update_yaxes(range=[0, 105], title="score (0-100)")
    styled(fig, title, 360, margin=dict(l=70, r=30, t=90, b=50))
    return fig
