"""The Word choice tab's figures: the logit lens as one grid a class reads (decoder layers up, the translation
across: each cell the token that layer would say, its colour the probability it gives the word finally written);
a reference's tokens teacher forced beside free running, where the two part marked; a contrast's attribution
beside the cross-attention; and a reliability diagram of one or two models (section 5.4)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from core.explain.calibration import Calibration
from core.explain.contrast import Contrast
from core.explain.free_running import FreeRunning
from core.explain.logit_lens import LogitLens

from .attention import ATTENTION_SCALE
from .knockout import INTACT, KNOCKED
from .layout import hover_text, label, narrow, shown, stacked, styled, token_axis, word_start_note, wrap
from .side_by_side import COLOURS

FORCED, FREE = INTACT, KNOCKED  # teacher forcing blue, free running vermilion


def logit_lens_map(lens: LogitLens, title: str) -> go.Figure:
    """Rows the decoder layers (the first at the bottom, as the stack is drawn), columns the target positions
    named by the token written there; each cell's text the layer's top token (bold where it is the one written),
    its colour that layer's probability of the token written. Hover: the layer's top tokens and the rank."""
    layers, positions = lens.probabilities.shape
    text = [[f"<b>{label(top[0])}</b>" if top[0] == lens.tokens[t] else label(top[0])
             for t, top in enumerate(lens.top_tokens[i])] for i in range(layers)]
    hover = [[f"layer {i + 1}, {hover_text(lens.tokens[t])}: rank {lens.ranks[i, t]}, "
              f"p = {lens.probabilities[i, t]:.3f}<br>would say: "
              + ", ".join(f"{hover_text(tok)} {p:.2f}" for tok, p in zip(lens.top_tokens[i][t],
                                                                         lens.top_probabilities[i, t]))
              for t in range(positions)] for i in range(layers)]
    fig = go.Figure(go.Heatmap(z=lens.probabilities, text=text, texttemplate="%{text}", textfont=dict(size=13),
                               customdata=hover, hovertemplate="%{customdata}<extra></extra>", zmin=0, zmax=1,
                               colorscale=ATTENTION_SCALE, colorbar=dict(thickness=10, title="p(written)"),
                               xgap=2, ygap=2))
    fig.update_xaxes(token_axis(lens.tokens, tickangle=-45, title="the token finally written"), showgrid=False)
    fig.update_yaxes(tickmode="array", tickvals=list(range(layers)), showgrid=False,
                     ticktext=[f"layer {i + 1}" + (" (output)" if i == layers - 1 else "") for i in range(layers)],
                     title="decoder layer" + (" → final LayerNorm" if lens.final_norm else ""))
    styled(fig, title + word_start_note(lens.tokens), int(max(320, 150 + 70 * layers)),
           margin=dict(l=150, r=40, t=70, b=100))
    # On a phone: short layer names, small type, and past 6 tokens no words in the cells (a tap shows them).
    narrow(fig, **{"margin.l": 60, "data[0].textfont.size": 9, "yaxis.title.text": "",
                   "yaxis.ticktext": [f"L{i + 1}" for i in range(layers)],
                   **({"data[0].texttemplate": ""} if positions > 6 else {})})
    return fig


def free_running_bars(f: FreeRunning, title: str) -> go.Figure:
    """Two bars per reference token: its probability after the reference's own prefix (teacher forcing) and after
    the model's greedy one (free running), a dashed line where the two prefixes part, naming what the model said."""
    x = list(range(len(f.reference)))
    names = [hover_text(t) for t in f.reference]
    fig = go.Figure()
    for name, values, colour, choices in (("teacher forcing: after the reference's words", f.forced, FORCED,
                                           f.forced_choice),
                                          ("free running: after the model's own words", f.free, FREE, f.greedy)):
        said = [hover_text(choices[t]) if t < len(choices) else "(it had stopped)" for t in x]
        fig.add_trace(go.Bar(x=x, y=np.nan_to_num(values, nan=0.0), name=name, marker_color=colour,
                             customdata=np.array([names, said], dtype=object).T,
                             hovertemplate="%{customdata[0]}: p = %{y:.3f}<br>its top token there: %{customdata[1]}"
                                           "<extra></extra>"))
    if f.diverges_at is not None:
        said = "(it had stopped)" if f.said_there is None else label(f.said_there)
        fig.add_vline(x=f.diverges_at - 0.5, line=dict(color="#555", width=2, dash="dash"))
        fig.add_annotation(x=f.diverges_at - 0.5, y=1.04, yref="y", xanchor="left", showarrow=False,
                           text=f"the model wrote {said}", font=dict(size=13, color="#333"))
    fig.update_layout(barmode="group", bargap=0.25,
                      legend=dict(orientation="h", x=0, y=1.08, yanchor="bottom", font=dict(size=12)))
    fig.update_xaxes(token_axis(f.reference, tickangle=-45, title="the reference's tokens"))
    fig.update_yaxes(range=[0, 1.12], title="p(reference token)")
    styled(fig, title + word_start_note(f.reference), 420, margin=dict(l=70, r=30, t=110, b=100))
    narrow(fig, **{"legend.yref": "container", "legend.y": 0, "legend.yanchor": "bottom", "margin.b": 190,
                   "height": 500})
    return fig


def contrast_bars(c: Contrast, title: str) -> go.Figure:
    """Per source token: the contrastive attribution (signed, each token's share of the absolute sum) beside the
    cross-attention from that position (mean of every layer and head); one above the other on a phone."""
    x = list(range(len(c.source_tokens)))
    shares = c.normalized
    purple, orange = "#5e3c99", "#e66101"  # PuOr's ends, as the Saliency tab's map
    names = [hover_text(t) for t in c.source_tokens]
    objective = "P" if c.objective == "probability" else "logit"
    titles = [f"which source tokens raise {label(c.token)} over {label(c.foil)}",
              f"cross-attention writing {label(c.token)}"]
    data = [dict(type="bar", x=x, y=shares.tolist(), marker_color=[purple if v >= 0 else orange for v in shares],
                 customdata=names, name="attribution",
                 hovertemplate=f"%{{customdata}}: %{{y:+.3f}} of {objective}(a) − {objective}(b)<extra></extra>"),
            dict(type="bar", x=x, y=c.cross_attention.tolist(), marker_color="#2171b5", customdata=names,
                 name="cross-attention", xaxis="x2", yaxis="y2",
                 hovertemplate="%{customdata}: weight %{y:.3f}<extra></extra>")]
    axis = token_axis(c.source_tokens, tickangle=-45, title="source token")
    reach = float(np.abs(shares).max()) or 1.0
    layout = dict(xaxis={**axis, "domain": [0, 0.45], "anchor": "y"},
                  xaxis2={**axis, "domain": [0.55, 1], "anchor": "y2"},
                  yaxis=dict(range=[-1.1 * reach, 1.1 * reach], title="share of the difference",
                             anchor="x", domain=[0, 1]),
                  yaxis2=dict(range=[0, 1.02], title="weight", anchor="x2", domain=[0, 1]), showlegend=False,
                  annotations=[dict(text=text, x=xc, xref="paper", xanchor="center", y=1.0, yref="paper",
                                    yanchor="bottom", showarrow=False, font=dict(size=14))
                               for text, xc in zip(titles, (0.225, 0.775))])
    fig = go.Figure(data=data, layout=layout)
    styled(fig, title, 400, margin=dict(l=70, r=30, t=100, b=100))
    stacked(fig, 1, 2, 720, vertical_spacing=0.25, titles=[wrap(t) for t in titles])
    narrow(fig, **{"margin.l": 60, "margin.r": 10})
    return fig


def reliability_diagram(models: Sequence[tuple[str, Calibration]], title: str) -> go.Figure:
    """Per confidence bin, each model's accuracy (a bar at the bin, its tokens in the hover) against the diagonal a
    calibrated model follows; the legend names each model's ECE. Model A blue, model B orange, as on Compare."""
    fig = go.Figure()
    for which, (name, c) in zip("AB", models):
        centres = (c.edges[:-1] + c.edges[1:]) / 2
        fig.add_trace(go.Bar(x=centres, y=np.nan_to_num(c.accuracy), width=0.8 / len(c.counts) / len(models),
                             offset=(0 if which == "A" else 0.8 / len(c.counts) / len(models)) - 0.4 / len(c.counts),
                             name=f"{label(name)}: ECE {c.ece:.3f}", marker_color=COLOURS[which],
                             customdata=np.array([c.counts, np.nan_to_num(c.confidence)]).T,
                             hovertemplate="confidence %{customdata[1]:.2f}: right %{y:.2f} of %{customdata[0]} "
                                           "tokens<extra>" + shown(name) + "</extra>"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="calibrated (accuracy = confidence)",
                             line=dict(color="#555", dash="dash")))
    fig.update_layout(legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", font=dict(size=12)))
    fig.update_xaxes(range=[0, 1], title="confidence: the top token's probability (bins of 0.1)", dtick=0.1)
    fig.update_yaxes(range=[0, 1.02], title="accuracy: the top token was the reference's")
    styled(fig, title, 460, margin=dict(l=80, r=30, t=110, b=70))
    narrow(fig, **{"legend.yref": "container", "legend.y": 0, "legend.yanchor": "bottom", "margin.b": 170,
                   "height": 540, "xaxis.dtick": 0.2})
    return fig
