"""The Positional encoding and Model tabs' figures: the sinusoidal encoding (table, curves,
similarity), where the parameters are, the learning-rate schedule, the label-smoothed target
and the masks of an example batch."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from .layout import LINE_PX, TEMPLATE, label, narrow, stacked, styled, title_room, token_axis, wrap


# ----- Positional encoding ----------------------------------------------------------------
def _positions(n: int) -> dict:
    """An axis of n whole positions. Plotly aims at about ten ticks, so up to ten positions it
    would tick halves ("0, 0.5, 1"): one tick per position instead."""
    return dict(title="position", dtick=1) if n <= 10 else dict(title="position")


def pe_heatmap(table: np.ndarray, note: str = "") -> go.Figure:
    fig = go.Figure(go.Heatmap(z=table, colorscale="RdBu", zmin=-1, zmax=1,
                               hovertemplate="position %{y}<br>dimension %{x}<br>PE = %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title="dimension: 2i (even, sin) or 2i+1 (odd, cos)")
    narrow(fig, **{"xaxis.title.text": "dimension: 2i (sin), 2i+1 (cos)"})
    fig.update_yaxes(_positions(len(table)), autorange="reversed")
    return styled(fig, f"PE for {table.shape[0]} positions × {table.shape[1]} dimensions{note}", 460)


PE_DOTS_UP_TO = 64  # positions: past this many the whole positions' dots would hide the curves


def pe_curves(table: np.ndarray, dims: Sequence[int], between: tuple[np.ndarray, np.ndarray]) -> go.Figure:
    """table: PE at whole positions; between: (positions, PE there) on a finer grid, so that each
    dimension is drawn as the sinusoid it is (dimension 0's wavelength, 2π, is 6.3 positions: joined
    from whole position to whole position it read as a zig-zag). The whole positions, the values the
    model adds, are dots on it."""
    fig = go.Figure()
    positions = np.arange(table.shape[0])
    colors = TEMPLATE.layout.colorway or qualitative.Plotly  # a dimension's curve and dots in one colour
    dots = len(positions) <= PE_DOTS_UP_TO
    for n, d in enumerate(dims):
        kind, color = "sin" if d % 2 == 0 else "cos", colors[n % len(colors)]
        fig.add_trace(go.Scatter(x=between[0], y=between[1][:, d], mode="lines", name=f"dim {d} ({kind})",
                                 legendgroup=str(d), line=dict(color=color), hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=positions, y=table[:, d], mode="markers", legendgroup=str(d), showlegend=False,
                                 marker=dict(color=color, size=6 if dots else 0.1), name=f"dim {d}",
                                 hovertemplate=f"dim {d}<br>pos %{{x}}<br>%{{y:.3f}}<extra></extra>"))
    fig.update_xaxes(_positions(len(table)))
    fig.update_yaxes(title="PE(pos, i)", range=[-1.1, 1.1])
    # Short enough for presenter mode's larger type on a 1280-px projector (the longer one ran off its edge).
    title = "One sinusoid per dimension, wavelengths 2π to 10000·2π (dots: the whole positions)"
    styled(fig, title, 400)
    # On a phone the legend goes above the plot, which keeps the width: two entries a row, their names
    # shorter ("dim 64 (sin)" was cut to "dim 64 (sin").
    short_names = {f"data[{2 * n}].name": f"dim {d} {'sin' if d % 2 == 0 else 'cos'}" for n, d in enumerate(dims)}
    narrow(fig, **short_names, **{"legend.orientation": "h", "legend.entrywidth": 0.45,
                                  "legend.entrywidthmode": "fraction", "legend.x": 0, "legend.y": 1.02,
                                  "legend.yanchor": "bottom", "margin.t": title_room(title) + 2 * LINE_PX + 12,
                                  "height": 460})
    return fig


def pe_similarity(table: np.ndarray) -> go.Figure:
    sim = table @ table.T
    fig = go.Figure(go.Heatmap(z=sim, colorscale="Viridis",
                               hovertemplate="pos %{y} · pos %{x}<br>dot product %{z:.2f}<extra></extra>"))
    fig.update_xaxes(_positions(len(table)))
    fig.update_yaxes(_positions(len(table)), autorange="reversed")
    return styled(fig, "Dot product PE(p)·PE(q): depends only on the distance |p − q|", 460)


def learned_heatmap(table: np.ndarray, name: str) -> go.Figure:
    """A learned position table (Table 3, row E), on a colour scale symmetric about 0 like the sinusoids'."""
    bound = float(np.abs(table).max()) or 1.0
    fig = go.Figure(go.Heatmap(z=table, colorscale="RdBu", zmin=-bound, zmax=bound,
                               hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title="dimension")
    fig.update_yaxes(_positions(len(table)), autorange="reversed")
    return styled(fig, f"{name}'s learned positions: {table.shape[0]} positions × {table.shape[1]} dimensions", 460)


def learned_similarity(table: np.ndarray) -> go.Figure:
    """Cosine similarity of the learned vectors: their lengths differ, which raw dot products would draw instead."""
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    fig = go.Figure(go.Heatmap(z=unit @ unit.T, colorscale="Viridis", zmin=-1, zmax=1,
                               hovertemplate="pos %{y} · pos %{x}<br>cosine %{z:.2f}<extra></extra>"))
    fig.update_xaxes(_positions(len(table)))
    fig.update_yaxes(_positions(len(table)), autorange="reversed")
    return styled(fig, "Learned: cosine of position p's vector with q's (bands along the diagonal: learnt order)", 460)


# ----- Model ---------------------------------------------------------------------------
def parameter_shares(groups: dict[str, int]) -> go.Figure:
    """One bar per kind of part (embeddings, each attention, feed-forward, LayerNorms), largest first."""
    total = sum(groups.values()) or 1
    names = sorted(groups, key=groups.get)  # a horizontal bar chart draws its first bar at the bottom
    fig = go.Figure(go.Bar(x=[groups[n] for n in names], y=names, orientation="h", marker_color="#1b6ca8",
                           text=[f"{groups[n]:,} ({100 * groups[n] / total:.1f}%)" for n in names],
                           textposition="outside", cliponaxis=False, hoverinfo="skip"))
    fig.update_xaxes(title="parameters", range=[0, 1.3 * max(groups.values(), default=1)])
    styled(fig, f"Where the {total:,} parameters are", 120 + 34 * len(groups), margin=dict(l=230, r=30, t=60, b=60))
    # On a phone, long names on two lines ("Decoder masked" over "self-attention") in a narrower margin, and a
    # longer axis: the bars keep some width, and the shares written beside them stay on the plot.
    narrow(fig, **{"height": 120 + 44 * len(groups), "margin.l": 105, "font.size": 10,
                   "xaxis.range": [0, 2.4 * max(groups.values(), default=1)],
                   "yaxis.tickmode": "array", "yaxis.tickvals": names, "yaxis.ticktext": [wrap(n, 15) for n in names]})
    return fig


def lr_schedule(steps: np.ndarray, lrs: np.ndarray, warmup: int, title: str, extended: bool = False,
                own: tuple[np.ndarray, str] | None = None) -> go.Figure:
    """extended: drawn past the steps asked for, to reach the peak at warmup. own: the model's own
    schedule (its learning rates at the same steps, and a legend name), drawn dashed for comparison."""
    fig = go.Figure(go.Scatter(x=steps, y=lrs, mode="lines", name=f"warmup_steps = {warmup}",
                               hovertemplate="step %{x}<br>lr %{y:.2e}<extra></extra>"))
    if own is not None:
        fig.add_trace(go.Scatter(x=steps, y=own[0], mode="lines", name=own[1], line=dict(color="#888", dash="dash"),
                                 hovertemplate="step %{x}<br>lr %{y:.2e}<extra>" + own[1] + "</extra>"))
    note = " (drawn past the steps shown, to its peak)" if extended else ""
    fig.add_vline(x=warmup, line_dash="dash", line_color="#d95f02", annotation_text=f"warmup_steps = {warmup}{note}",
                  # Left of a line near the right edge: on its right the label ran off the plot.
                  annotation_position="top left" if extended or warmup > 0.6 * steps[-1] else "top right")
    # A fixed range: plotly widens an automatic one to hold the warm-up line's label (to negative steps).
    fig.update_xaxes(title="training step", range=[0, steps[-1]])
    fig.update_yaxes(title="learning rate", exponentformat="e")
    # The legend above the plot, not beside it: the curves keep the figure's whole width.
    return styled(fig, title, 400, margin=dict(l=70, r=30, t=90, b=60),
                   legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"))


def label_smoothing(dist: np.ndarray, tokens: Sequence[str], target: int, eps: float) -> go.Figure:
    colors = ["#1b6ca8" if i == target else "#9ecae1" for i in range(len(tokens))]
    # Each bar's value written on it: on a log axis 0.9 and 0.7 look alike.
    fig = go.Figure(go.Bar(x=list(range(len(tokens))), y=dist, marker_color=colors,
                           texttemplate="%{y:.2g}", textposition="outside", cliponaxis=False,
                           hovertemplate="%{y:.5f}<extra></extra>"))
    fig.update_xaxes(token_axis(tokens, tickangle=-45))
    # One tick a decade, as powers of ten: plotly's SI prefixes wrote 0.0001 as "100μ". The axis ends just
    # above 1 (left to itself, ε = 0's lone bar at 1 got an axis from 0.1 to 10).
    lowest = float(dist[dist > 0].min()) if (dist > 0).any() else 1.0
    fig.update_yaxes(title="target probability", type="log", dtick=1, exponentformat="power",
                     range=[min(math.floor(math.log10(lowest)), -1) - 0.2, 0.1])
    styled(fig, f"Label-smoothed target (ε = {eps:g}): reference token in dark blue", 380)
    # On a phone a bar is too narrow for its value written across it: plotly shrank "0.000012" to a speck.
    narrow(fig, **{"data[0].textangle": -90, "uniformtext.minsize": 10, "uniformtext.mode": "show"})
    return fig


def masks(src_tokens: list[list[str]], src_pad: np.ndarray, tgt_tokens: list[str]) -> go.Figure:
    """src_pad (B, S): True at padding; the causal mask of one target sentence beside it."""
    t = len(tgt_tokens)
    causal = np.tril(np.ones((t, t)))
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.12,
                        subplot_titles=["Source padding mask (position × sentence)",
                                        "Decoder causal mask (query × key)"])
    # One column per sentence, its tokens down the column: a row of tokens in cells one position
    # wide would overlap.
    text = np.array([[label(row[j] if j < len(row) else "<pad>") for row in src_tokens]
                     for j in range(src_pad.shape[1])])
    fig.add_trace(go.Heatmap(z=(~src_pad).T.astype(float), text=text, texttemplate="%{text}", textfont=dict(size=12),
                             zmin=0, zmax=1, colorscale=[[0, "#eeeeee"], [1, "#9ecae1"]], showscale=False,
                             hovertemplate="sentence %{x}, position %{y}: %{text}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Heatmap(z=causal, colorscale=[[0, "#eeeeee"], [1, "#9ecae1"]], showscale=False,
                             x=list(range(t)), y=list(range(t)),
                             hovertemplate="query %{y} may see key %{x}: %{z}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title="sentence", tickmode="array", tickvals=list(range(len(src_tokens))), row=1, col=1)
    fig.update_yaxes(title="position", autorange="reversed", row=1, col=1)
    fig.update_xaxes(token_axis(tgt_tokens, tickangle=-45), row=1, col=2)
    fig.update_yaxes(token_axis(tgt_tokens, autorange="reversed"), row=1, col=2)
    # On a phone, one mask above the other, each titled on two lines.
    stacked(fig, 1, 2, 860, vertical_spacing=0.2,
            titles=["Source padding mask<br>(position × sentence)", "Decoder causal mask<br>(query × key)"])
    title = "Masks of an example batch (blue: may attend, grey: masked)"
    styled(fig, title, 420)
    narrow(fig, **{"margin.t": title_room(title) + 2 * LINE_PX})
    return fig
