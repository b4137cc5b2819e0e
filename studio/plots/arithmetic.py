"""The Attention arithmetic tab's figures: one query's numbers through a multi-head attention sub-layer
(core.explain.arithmetic), each vector a heat strip (one-row heatmap: hover names each dimension's value) and
each per-key matrix one row per key, every panel titled with its step of section 3.2.

Signed numbers use PuOr (ColorBrewer's purple-orange, colour-blind safe) centred on 0, each panel on
its own symmetric range; attention weights use the Attention tab's scale from 0 to 1.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from core.explain.arithmetic import AttentionArithmetic

from .attention import ATTENTION_SCALE
from .layout import NARROW_FONT, hover_text, label, narrow, styled, token_axis

SIGNED_SCALE = "PuOr"
STRIP_PX, KEY_PX, TITLE_PX = 34, 16, 44  # a vector's strip, a key's row, a panel's title above it


def _signed(z: np.ndarray, rows: Sequence[str], what: str) -> dict:
    """A signed heatmap (a trace's dict: plotly checks it once, with the figure), 0 white; hover: the row's
    name, the dimension and the value."""
    z = np.atleast_2d(np.asarray(z, dtype=float))
    reach = float(np.abs(z).max()) or 1.0
    names = np.array([[hover_text(r)] * z.shape[1] for r in rows], dtype=object)
    return dict(type="heatmap", z=z, x=list(range(z.shape[1])), y=list(range(z.shape[0])), colorscale=SIGNED_SCALE,
                zmin=-reach, zmax=reach, zmid=0, showscale=False, customdata=names,
                hovertemplate=f"{what}: %{{customdata}}<br>dimension %{{x}}: %{{z:.4f}}<extra></extra>")


def _panels(title: str, panels: list[tuple], short: Sequence[str]) -> go.Figure:
    """A column of panels (title, trace, rows, y-axis settings[, x-axis settings]), each as high as its rows,
    its title above it; on a phone the short titles, which fit a line there. Laid out here, not by
    make_subplots and an update per panel: those took 10 times as long as core's arithmetic."""
    heights = [STRIP_PX if p[2] == 1 else KEY_PX * p[2] + 20 for p in panels]
    plot_px = sum(heights) + TITLE_PX * (len(panels) - 1)
    data, layout, top = [], {"annotations": []}, 1.0
    for i, ((text, trace, _, yaxis, *xaxis), px) in enumerate(zip(panels, heights), 1):
        bottom, n = max(top - px / plot_px, 0.0), "" if i == 1 else str(i)
        layout[f"xaxis{n}"] = {**(xaxis[0] if xaxis else {}), "anchor": f"y{n}", "showgrid": False, "zeroline": False}
        layout[f"yaxis{n}"] = {**(yaxis or {"showticklabels": False}), "anchor": f"x{n}", "domain": [bottom, top],
                               "showgrid": False, "zeroline": False}
        layout["annotations"].append(dict(text=text, x=0, xref="paper", xanchor="left", y=top, yref="paper",
                                          yanchor="bottom", showarrow=False, font=dict(size=13)))
        data.append({**trace, "xaxis": f"x{n}", "yaxis": f"y{n}"})
        top = bottom - TITLE_PX / plot_px
    fig = go.Figure(data=data, layout=layout)
    styled(fig, title, plot_px + 140, margin=dict(l=110, r=20, t=90, b=40))
    # On a phone the title wraps onto more lines, and its margin grows: the figure grows as much, so the panels
    # keep their heights and the gaps their room for a title (squeezed, titles ran into the ticks above).
    top_px = fig.layout.meta["narrow"].get("margin.t", 90)
    narrow(fig, **{f"annotations[{i}].text": text for i, text in enumerate(short)},
           **{f"annotations[{i}].font.size": NARROW_FONT for i in range(len(panels))},
           **{"margin.l": 70, "height": plot_px + 50 + top_px})
    return fig


def _keys_axis(tokens: Sequence[str]) -> dict:
    return token_axis(tokens, max_labels=40, autorange="reversed")


def query_and_keys(a: AttentionArithmetic, title: str) -> go.Figure:
    """Steps 1 and 2: the input at the query, its query vector q and every key k_j."""
    h = a.head + 1
    return _panels(title, [
        (f"x: what the sub-layer reads at the query ({a.x.shape[0]} numbers, d_model)", _signed(a.x, ["x"], "x"),
         1, {}),
        (f"q = x·W<sub>{h}</sub><sup>Q</sup>: head {h}'s query ({a.q.shape[0]} numbers, d_k)", _signed(a.q, ["q"], "q"),
         1, {}),
        (f"k<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>K</sup>: a key per token j (rows)",
         _signed(a.keys, a.key_tokens, "key"), len(a.key_tokens), _keys_axis(a.key_tokens)),
    ], ["x: the input at the query", f"q = x·W<sub>{h}</sub><sup>Q</sup>",
        f"k<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>K</sup>, a row per key"])


def weighted_values(a: AttentionArithmetic, title: str) -> go.Figure:
    """Step 7: the softmax weights (from the table above), the values v_j and their weighted sum."""
    h, keys = a.head + 1, a.key_tokens
    weights = dict(type="heatmap", z=[a.weights], x=list(range(len(keys))), y=[0], colorscale=ATTENTION_SCALE, zmin=0,
                   zmax=1, showscale=False, customdata=[[hover_text(t) for t in keys]],
                   hovertemplate="weight on %{customdata}: %{z:.4f}<extra></extra>")
    return _panels(title, [
        ("softmax weights w<sub>j</sub> (as in the Attention tab's map row)", weights, 1, {},
         token_axis(keys, max_labels=30)),
        (f"v<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>V</sup>: a value per token j (rows)",
         _signed(a.values, keys, "value"), len(keys), _keys_axis(keys)),
        (f"head<sub>{h}</sub> = Σ<sub>j</sub> w<sub>j</sub> v<sub>j</sub>: the weighted sum ({a.q.shape[0]} numbers)",
         _signed(a.head_output, [f"head {h}"], "head"), 1, {}),
    ], ["softmax weights w<sub>j</sub>", f"v<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>V</sup>, a row per key",
        f"head<sub>{h}</sub> = Σ<sub>j</sub> w<sub>j</sub> v<sub>j</sub>"])


def concat_to_output(a: AttentionArithmetic, n_heads: int, norm_first: bool, title: str) -> go.Figure:
    """Steps 8-10: every head's output side by side, W^O, the residual connection and LayerNorm; head
    `a.head`'s slice of the concatenation framed."""
    d_k = a.q.shape[0]
    last = ("output = x + MultiHead (pre-norm: LayerNorm comes before the next sub-layer)" if norm_first else
            "output = LayerNorm(x + MultiHead): what the next sub-layer reads")
    fig = _panels(title, [
        (f"Concat(head<sub>1</sub>, …, head<sub>{n_heads}</sub>): {n_heads} heads × {d_k} numbers",
         _signed(a.concat, ["concat"], "concat"), 1, {}),
        ("MultiHead = Concat·W<sup>O</sup>", _signed(a.projected, ["MultiHead"], "MultiHead"), 1, {}),
        ("x + MultiHead: the residual connection (dropout is off)",
         _signed(a.residual, ["x + MultiHead"], "residual"), 1, {}),
        (last, _signed(a.output, ["output"], "output"), 1, {}),
    ], [f"Concat(head<sub>1</sub>, …, head<sub>{n_heads}</sub>)", "MultiHead = Concat·W<sup>O</sup>",
        "x + MultiHead (residual)", "x + MultiHead" if norm_first else "LayerNorm(x + MultiHead)"])
    left = a.head * d_k - 0.5
    fig.add_shape(type="rect", x0=left, x1=left + d_k, y0=-0.5, y1=0.5, xref="x", yref="y",
                  line=dict(color="#111", width=2))
    return fig


def arithmetic_title(model: str, stack: str, a: AttentionArithmetic, step: str) -> str:
    """A figure's title: the model, the sub-layer, the head and the query token."""
    return (f"{label(model)} · {stack}, layer {a.layer + 1}, head {a.head + 1} · query "
            f"“{label(a.query_tokens[a.query])}”<br>{step}")
