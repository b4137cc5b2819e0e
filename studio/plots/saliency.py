"""The Saliency tab's figures: an attribution map beside the cross-attention, on the same axes (target
tokens down, source tokens across), and their agreement per target token.

Attributions are signed: PuOr (ColorBrewer's purple-orange, colour-blind safe) centred on 0, purple
where a source token raised the target token's probability, orange where it lowered it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from .arithmetic import SIGNED_SCALE
from .attention import ATTENTION_SCALE
from .layout import hover_text, narrow, stacked, styled, token_axis, wrap


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
    titles = [f"Attribution: {method}", "Cross-attention, mean of all layers and heads"]
    x_axis = {**token_axis(source, max_labels=30, tickangle=-45, title="source token"), "showgrid": False}
    y_axis = {**token_axis(target, max_labels=40, autorange="reversed"), "showgrid": False}
    data = [dict(type="heatmap", z=attribution, colorscale=SIGNED_SCALE, zmin=-reach, zmax=reach, zmid=0,
                 customdata=cells, colorbar=dict(x=0.37, thickness=10, title="share"),
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
    styled(fig, title, height, margin=dict(l=110, r=40, t=90, b=100))
    # On a phone one map above the other, each with its colour bar beside it and its own token labels.
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.2, titles=[wrap(titles[0]), "Cross-attention (mean)"])
    bars = {f"data[{i}].colorbar.{key}": value for i, y in ((0, 1.0), (1, 0.0))
            for key, value in (("x", 1.0), ("y", y), ("yanchor", "top" if y else "bottom"), ("len", 0.4),
                               ("title.text", ""))}
    narrow(fig, **bars, **{"yaxis2.showticklabels": True, "margin.l": 70, "margin.r": 10})
    return fig


def agreement_bars(agreement: np.ndarray, target: Sequence[str], mean: float, title: str) -> go.Figure:
    """Spearman's rho per target token (a bar each; none where a row is constant), the mean as a line."""
    rho = np.asarray(agreement, dtype=float)
    fig = go.Figure(go.Bar(x=list(range(len(target))), y=np.where(np.isfinite(rho), rho, None),
                           marker_color=np.where(rho >= 0, "#5e3c99", "#e66101"),  # PuOr's ends
                           customdata=[hover_text(t) for t in target],
                           hovertemplate="%{customdata}<br>Spearman ρ %{y:.3f}<extra></extra>"))
    if np.isfinite(mean):
        fig.add_hline(y=mean, line=dict(color="#333", width=1, dash="dash"),
                      annotation=dict(text=f"mean {mean:.2f}", xanchor="right", x=1, font=dict(size=12)))
    fig.update_xaxes(token_axis(target, tickangle=-45))
    fig.update_yaxes(range=[-1.05, 1.05], title="Spearman ρ", zeroline=True)
    return styled(fig, title, 340)
