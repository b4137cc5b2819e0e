"""The Saliency tab's figures: an attribution map beside the cross-attention, on the same axes (target
tokens down, source tokens across), and their agreement per target token.

Attributions are signed: PuOr (ColorBrewer's purple-orange, colour-blind safe) centred on 0, purple
where a source token raised the target token's probability, orange where it lowered it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

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
    columns the source tokens with <eos>."""
    reach = float(np.abs(attribution).max()) or 1.0
    cells = _cells(target, source)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.14,
                        subplot_titles=[f"Attribution: {method}", "Cross-attention, mean of all layers and heads"])
    fig.add_trace(go.Heatmap(z=attribution, colorscale=SIGNED_SCALE, zmin=-reach, zmax=reach, zmid=0,
                             customdata=cells, colorbar=dict(x=0.43, thickness=10, title="share"),
                             hovertemplate="%{customdata}<br>attribution %{z:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(z=attention, colorscale=ATTENTION_SCALE, zmin=0, zmax=1, customdata=cells,
                             colorbar=dict(x=1.0, thickness=10, title="weight"),
                             hovertemplate="%{customdata}<br>attention %{z:.3f}<extra></extra>"), row=1, col=2)
    for col in (1, 2):
        fig.update_xaxes(token_axis(source, max_labels=30, tickangle=-45, title="source token"), row=1, col=col)
        fig.update_yaxes(token_axis(target, max_labels=40, autorange="reversed"), row=1, col=col)
    fig.update_yaxes(title="target token", row=1, col=1)
    fig.update_yaxes(showgrid=False)
    fig.update_xaxes(showgrid=False)
    height = int(min(900, max(420, 170 + 24 * len(target))))
    styled(fig, title, height, margin=dict(l=110, r=40, t=90, b=100))
    # On a phone one map above the other, each with its colour bar beside it and its own token labels.
    stacked(fig, 1, 2, 2 * height, vertical_spacing=0.2,
            titles=[wrap(f"Attribution: {method}"), "Cross-attention (mean)"])
    narrow(fig, **{"yaxis2.showticklabels": True, "data[0].colorbar.x": 1.0, "data[0].colorbar.y": 1.0,
                   "data[0].colorbar.yanchor": "top", "data[0].colorbar.len": 0.4, "data[1].colorbar.y": 0.0,
                   "data[1].colorbar.yanchor": "bottom", "data[1].colorbar.len": 0.4, "data[0].colorbar.title.text": "",
                   "data[1].colorbar.title.text": "", "margin.l": 70, "margin.r": 10})
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
