"""The Train tab's figures: the run's curves (training and validation, one panel per quantity)
and the fixed example's cross-attention at a snapshot."""
from __future__ import annotations

import itertools

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..plots.attention import attention_head
from ..plots.layout import NARROW_FONT, TEMPLATE, empty, narrow, stacked
from .job import Frame, JobView

CURVES = (("Loss (label-smoothed)", "loss", "val_loss"), ("Perplexity", "perplexity", "val_perplexity"),
          ("Token accuracy", "accuracy", "val_accuracy"), ("Learning rate", "lr", None),
          ("Target tokens/s, smoothed", "tokens_per_s", None), ("Exact match / BLEU", None, None))  # validation
# Points the speed curve averages over: step by step it swung between 3k and 22k tokens/s (batches of
# different lengths, evaluations, other users), which on a projector reads as noise.
SPEED_WINDOW = 20
PERPLEXITY_TICKS = [m * 10 ** e for e in range(6) for m in (1, 2, 5)]  # 1 to 500,000: any vocabulary


def training_curves(view: JobView) -> go.Figure:
    """Train (line) and validation (dots) curves against the step, one panel per quantity."""
    if not view.history:
        return empty("Press Start: the curves appear with the first steps.", 520)
    fig = make_subplots(rows=2, cols=3, subplot_titles=[c[0] for c in CURVES], shared_xaxes="all",
                        horizontal_spacing=0.07, vertical_spacing=0.12)
    steps = [h["step"] for h in view.history]
    evals = view.evaluations
    for i, (_, train_key, valid_key) in enumerate(CURVES):
        row, col = divmod(i, 3)
        if train_key:
            values = [h[train_key] for h in view.history]
            if train_key == "tokens_per_s":
                values = running_mean(values, SPEED_WINDOW)
            fig.add_trace(go.Scatter(x=steps, y=values, mode="lines", name="train",
                                     line=dict(color="#1b6ca8", width=1.5), showlegend=i == 0,
                                     legendgroup="train"), row=row + 1, col=col + 1)
        if valid_key and evals:
            fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.metrics.get(valid_key) for e in evals],
                                     mode="lines+markers", name="validation", line=dict(color="#d95f02"),
                                     showlegend=i == 0, legendgroup="valid"), row=row + 1, col=col + 1)
    if evals:
        for key, color, name in (("exact_match", "#1a9850", "exact match"), ("bleu", "#762a83", "BLEU / 100")):
            scale = 0.01 if key == "bleu" else 1.0
            fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.metrics.get(key, 0) * scale for e in evals],
                                     mode="lines+markers", name=name, line=dict(color=color)), row=2, col=3)
        fig.update_yaxes(range=[0, 1.02], row=2, col=3)
    # 1, 2, 5 per decade, each written in full: plotly's "D2" wrote 20 and 50 as "2" and "5".
    fig.update_yaxes(type="log", tickvals=PERPLEXITY_TICKS, tickformat=",d", row=1, col=2)
    fig.update_yaxes(range=[0, 1.02], row=1, col=3)
    fig.update_yaxes(exponentformat="e", row=2, col=1)
    fig.update_xaxes(title=dict(text="step", standoff=6), row=2)
    # The legend above the panels, right-aligned: below them it crowded the step titles.
    # uirevision: a zoom into the curves stays while the run draws on (it snapped back within a second).
    fig.update_layout(legend=dict(orientation="h", x=1, xanchor="right", y=1.06, yanchor="bottom"),
                      margin=dict(l=60, r=30, t=80, b=50), height=560, template=TEMPLATE,
                      uirevision=f"run-{view.run}")
    # On a phone, one panel under another, the legend above the first.
    stacked(fig, 2, 3, 1150, vertical_spacing=0.06)
    narrow(fig, **{"font.size": NARROW_FONT, "margin.t": 125, "legend.x": 0, "legend.xanchor": "left",
                   "legend.y": 1.03})
    return fig


def running_mean(values: list[float], window: int) -> list[float]:
    """Each value averaged with the (up to) window - 1 before it."""
    sums = [0.0, *itertools.accumulate(values)]
    return [(sums[i + 1] - sums[max(0, i + 1 - window)]) / min(i + 1, window) for i in range(len(values))]


def frame_at(view: JobView, step: float | None) -> Frame | None:
    """The attention snapshot nearest to step (the latest when step is None)."""
    if not view.frames:
        return None
    if step is None:
        return view.frames[-1]
    return min(view.frames, key=lambda f: abs(f.step - float(step)))


def training_attention(view: JobView, step: float | None, layer: float, head: float) -> go.Figure:
    """The fixed example's cross-attention at a step: one layer, one head (0: mean of heads)."""
    frame = frame_at(view, step)
    if frame is None or view.example is None:
        return empty("Press Start: snapshots of the attention appear as the model trains.", 420)
    n_layers, n_heads = frame.cross.shape[:2]
    li = min(max(int(layer), 1), n_layers) - 1
    h = min(max(int(head), 0), n_heads)
    weights = frame.cross[li].mean(axis=0) if h == 0 else frame.cross[li, h - 1]
    which = f"mean of {n_heads} heads" if h == 0 else f"head {h}"
    rows, cols = view.example
    return attention_head(weights, rows, cols, f"Step {frame.step}: cross-attention, layer {li + 1}, {which}",
                          "reference token<br>being predicted", "source token")
