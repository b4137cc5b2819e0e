"""The Attention arithmetic tab's figures: one query's numbers through a multi-head attention sub-layer
(core.explain.arithmetic), each vector a heat strip (one-row heatmap: hover names each dimension's value) and
each per-key matrix one row per key, every panel titled with its step of section 3.2.

Signed numbers use PuOr (ColorBrewer's purple-orange, colour-blind safe) centred on 0: purple above 0, orange
below, white at 0. Panels whose numbers live in one space share a symmetric range and a colour bar (q with the
keys, the values with their weighted sum); any other panel has its own; attention weights use the Attention
tab's scale from 0 to 1. Every colour bar is drawn beside its panels, its ends and 0 labelled, so a projector
shows the numbers, not only a hover; a short strip also prints its numbers in its cells.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from core.explain.arithmetic import AttentionArithmetic

from .attention import ATTENTION_SCALE
from .layout import NARROW_FONT, hover_text, label, narrow, styled, token_axis

SIGNED_SCALE = "PuOr"
# A vector's strip (tall enough for its colour bar's three labels), a key's row, a panel's title above it.
STRIP_PX, KEY_PX, TITLE_PX = 40, 16, 44
TOKENS_PX = 14  # more room under a panel whose columns are tokens: their labels stand taller than numbers
# A strip of at most this many numbers prints them (two decimals), in presenter mode's type across a
# projector's ~1,000 px too; on a phone (~250 px of plot) at most PHONE_CELLS.
PRINTED_CELLS, PRINTED_WEIGHTS, PHONE_CELLS = 16, 20, 8
BAR_TITLE_PX = 20  # a line of a colour bar's title
BAR = dict(thickness=14, xpad=8, ypad=0, lenmode="fraction", outlinewidth=0, ticks="outside", ticklen=3)


def _reach(*arrays: np.ndarray) -> float:
    """The symmetric range of a colour scale shared by arrays: their largest |value| (1 if all are 0)."""
    return max(float(np.abs(np.asarray(z, dtype=float)).max()) for z in arrays) or 1.0


def _number(v: float, reach: float) -> str:
    """A colour bar's tick label, every label of a bar to as many decimals (the bar's reach has 2 digits)."""
    digits = 0 if reach >= 10 else 1 if reach >= 1 else 2
    return "0" if v == 0 else f"{v:.{digits}f}".replace("-", "−")


def _scale(title: str, reach: float | None) -> dict:
    """A layout colour axis: signed from -reach to reach, 0 white, or the attention weights' 0 to 1 (reach
    None); its colour bar titled title (what the colour is). Its place and ticks are set by _panels."""
    if reach is None:
        axis = dict(colorscale=ATTENTION_SCALE, cmin=0.0, cmax=1.0)
    else:
        axis = dict(colorscale=SIGNED_SCALE, cmin=-reach, cmax=reach, cmid=0.0)
    return {**axis, "colorbar": {**BAR, "title": {"text": title, "side": "top"}}}


def _signed(z: np.ndarray, rows: Sequence[str], what: str, scale: str) -> dict:
    """A signed heatmap (a trace's dict: plotly checks it once, with the figure) on the colour axis scale; hover:
    the row's name, the dimension and the value."""
    z = np.atleast_2d(np.asarray(z, dtype=float))
    names = np.array([[hover_text(r)] * z.shape[1] for r in rows], dtype=object)
    return dict(type="heatmap", z=z, x=list(range(z.shape[1])), y=list(range(z.shape[0])), coloraxis=scale,
                customdata=names,
                hovertemplate=f"{what}: %{{customdata}}<br>dimension %{{x}}: %{{z:.4f}}<extra></extra>")


def _panels(title: str, panels: list[tuple], short: Sequence[str], scales: dict[str, dict]) -> go.Figure:
    """A column of panels (title, trace, rows, y-axis settings[, x-axis settings]), each as high as its rows,
    its title above it; on a phone the short titles, which fit a line there. scales: the colour axes the traces
    use (name: _scale's layout), each with a colour bar beside its panels. Laid out here, not by make_subplots
    and an update per panel: those took 10 times as long as core's arithmetic."""
    heights = [STRIP_PX if p[2] == 1 else KEY_PX * p[2] + 20 for p in panels]
    # Below each panel but the last: room for the next one's title, the tokens under this one, and the lines past
    # the first of the title of a colour bar that starts at the next (beside the title, over this bar's last tick).
    starts = {}
    for i, p in enumerate(panels):
        starts.setdefault(p[1]["coloraxis"], i)
    extra = {i: scales[name]["colorbar"]["title"]["text"].count("<br>") for name, i in starts.items() if i}
    gaps = [TITLE_PX + (TOKENS_PX if p[4:] else 0) + BAR_TITLE_PX * extra.get(i + 1, 0) for i, p in
            enumerate(panels[:-1])]
    plot_px = sum(heights) + sum(gaps)
    data, layout, top = [], {"annotations": []}, 1.0
    spans: dict[str, list[float]] = {}  # a colour axis's [bottom, top] over its panels
    phone: dict[str, object] = {}
    for i, ((text, trace, rows, yaxis, *xaxis), px) in enumerate(zip(panels, heights), 1):
        bottom, n = max(top - px / plot_px, 0.0), "" if i == 1 else str(i)
        layout[f"xaxis{n}"] = {**(xaxis[0] if xaxis else {}), "anchor": f"y{n}", "showgrid": False, "zeroline": False}
        layout[f"yaxis{n}"] = {**(yaxis or {"showticklabels": False}), "anchor": f"x{n}", "domain": [bottom, top],
                               "showgrid": False, "zeroline": False}
        layout["annotations"].append(dict(text=text, x=0, xref="paper", xanchor="left", y=top, yref="paper",
                                          yanchor="bottom", showarrow=False, font=dict(size=13)))
        span = spans.setdefault(trace["coloraxis"], [bottom, top])
        span[0] = bottom
        cells = len(trace["z"][0])
        if rows == 1 and cells <= (PRINTED_WEIGHTS if scales[trace["coloraxis"]]["cmin"] == 0 else PRINTED_CELLS):
            trace = {**trace, "texttemplate": "%{z:.2f}"}
            if cells > PHONE_CELLS:
                phone[f"data[{i - 1}].texttemplate"] = ""
        data.append({**trace, "xaxis": f"x{n}", "yaxis": f"y{n}"})
        if xaxis:  # on a phone its upright tokens ran into the next title: the rows below name the same keys
            phone[f"xaxis{n}.showticklabels"] = False
        top = bottom - (gaps[i - 1] if i <= len(gaps) else 0) / plot_px
    for name, axis in scales.items():
        bottom, top = spans[name]
        low, high = axis["cmin"], axis["cmax"]
        ticks = [low, high] if low == 0 else [low, 0.0, high]
        if low != 0 and (top - bottom) * plot_px >= 3 * STRIP_PX:  # a tall bar: halfway marks too
            ticks = [low, low / 2, 0.0, high / 2, high]
        # Plotly draws a bar's title inside its length: the bar reaches up into the gap above its first panel by
        # the title's lines, so the bar itself spans its panels (a strip's bar was squeezed to a third of it).
        above = (BAR_TITLE_PX * (axis["colorbar"]["title"]["text"].count("<br>") + 1)) / plot_px
        axis["colorbar"].update(y=top + above, yanchor="top", len=top - bottom + above, tickvals=ticks,
                                ticktext=["0", "1"] if low == 0 else [_number(v, high) for v in ticks])
        layout[name] = axis
        phone.update({f"{name}.colorbar.thickness": 8, f"{name}.colorbar.xpad": 4})
    fig = go.Figure(data=data, layout=layout)
    styled(fig, title, plot_px + 140, margin=dict(l=110, r=20, t=90, b=40))
    # On a phone the title wraps onto more lines, and its margin grows: the figure grows as much, so the panels
    # keep their heights and the gaps their room for a title (squeezed, titles ran into the ticks above).
    top_px = fig.layout.meta["narrow"].get("margin.t", 90)
    narrow(fig, **{f"annotations[{i}].text": text for i, text in enumerate(short)},
           **{f"annotations[{i}].font.size": NARROW_FONT for i in range(len(panels))},
           **{"margin.l": 70, "height": plot_px + 50 + top_px}, **phone)
    return fig


def _keys_axis(tokens: Sequence[str]) -> dict:
    return token_axis(tokens, max_labels=40, autorange="reversed")


def query_and_keys(a: AttentionArithmetic, title: str) -> go.Figure:
    """Steps 1 and 2: the input at the query, its query vector q and every key k_j (q and the keys, whose dot
    products come next, on one colour scale)."""
    h = a.head + 1
    return _panels(title, [
        (f"x: what the sub-layer reads at the query ({a.x.shape[0]} numbers, d_model)",
         _signed(a.x, ["x"], "x", "coloraxis"), 1, {}),
        (f"q = x·W<sub>{h}</sub><sup>Q</sup>: head {h}'s query ({a.q.shape[0]} numbers, d_k)",
         _signed(a.q, ["q"], "q", "coloraxis2"), 1, {}),
        (f"k<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>K</sup>: a key per token j (rows)",
         _signed(a.keys, a.key_tokens, "key", "coloraxis2"), len(a.key_tokens), _keys_axis(a.key_tokens)),
    ], ["x: the input at the query", f"q = x·W<sub>{h}</sub><sup>Q</sup>",
        f"k<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>K</sup>, a row per key"],
        {"coloraxis": _scale("x", _reach(a.x)),
         "coloraxis2": _scale("q, k<sub>j</sub>", _reach(a.q, a.keys))})


def weighted_values(a: AttentionArithmetic, title: str) -> go.Figure:
    """Step 7: the softmax weights (from the table above), the values v_j and their weighted sum (on the values'
    colour scale: a mean of them, paler the more the weights spread)."""
    h, keys = a.head + 1, a.key_tokens
    weights = dict(type="heatmap", z=[a.weights], x=list(range(len(keys))), y=[0], coloraxis="coloraxis",
                   customdata=[[hover_text(t) for t in keys]],
                   hovertemplate="weight on %{customdata}: %{z:.4f}<extra></extra>")
    return _panels(title, [
        ("softmax weights w<sub>j</sub> (as in the Attention tab's map row)", weights, 1, {},
         token_axis(keys, max_labels=30)),
        (f"v<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>V</sup>: a value per token j (rows)",
         _signed(a.values, keys, "value", "coloraxis2"), len(keys), _keys_axis(keys)),
        (f"head<sub>{h}</sub> = Σ<sub>j</sub> w<sub>j</sub> v<sub>j</sub>: the weighted sum ({a.q.shape[0]} numbers)",
         _signed(a.head_output, [f"head {h}"], "head", "coloraxis2"), 1, {}),
    ], ["softmax weights w<sub>j</sub>", f"v<sub>j</sub> = x<sub>j</sub>·W<sub>{h}</sub><sup>V</sup>, a row per key",
        f"head<sub>{h}</sub> = Σ<sub>j</sub> w<sub>j</sub> v<sub>j</sub>"],
        {"coloraxis": _scale("weight", None),
         "coloraxis2": _scale(f"v<sub>j</sub>, head<sub>{h}</sub>", _reach(a.values, a.head_output))})


def concat_to_output(a: AttentionArithmetic, n_heads: int, norm_first: bool, title: str) -> go.Figure:
    """Steps 8-10: every head's output side by side, W^O, the residual connection and LayerNorm; head
    `a.head`'s slice of the concatenation framed. The heads and their projection share a colour scale, the
    residual sum and the output another."""
    d_k = a.q.shape[0]
    last = ("output = x + MultiHead (pre-norm: LayerNorm comes before the next sub-layer)" if norm_first else
            "output = LayerNorm(x + MultiHead): what the next sub-layer reads")
    fig = _panels(title, [
        (f"Concat(head<sub>1</sub>, …, head<sub>{n_heads}</sub>): {n_heads} heads × {d_k} numbers",
         _signed(a.concat, ["concat"], "concat", "coloraxis"), 1, {}),
        ("MultiHead = Concat·W<sup>O</sup>", _signed(a.projected, ["MultiHead"], "MultiHead", "coloraxis"), 1, {}),
        ("x + MultiHead: the residual connection (dropout is off)",
         _signed(a.residual, ["x + MultiHead"], "residual", "coloraxis2"), 1, {}),
        (last, _signed(a.output, ["output"], "output", "coloraxis2"), 1, {}),
    ], [f"Concat(head<sub>1</sub>, …, head<sub>{n_heads}</sub>)", "MultiHead = Concat·W<sup>O</sup>",
        "x + MultiHead (residual)", "x + MultiHead" if norm_first else "LayerNorm(x + MultiHead)"],
        {"coloraxis": _scale("Concat,<br>MultiHead", _reach(a.concat, a.projected)),
         "coloraxis2": _scale("residual,<br>output", _reach(a.residual, a.output))})
    left = a.head * d_k - 0.5
    fig.add_shape(type="rect", x0=left, x1=left + d_k, y0=-0.5, y1=0.5, xref="x", yref="y",
                  line=dict(color="#111", width=2))
    return fig


def arithmetic_title(model: str, stack: str, a: AttentionArithmetic, step: str) -> str:
    """A figure's title: the model, the sub-layer, the head and the query token."""
    return (f"{label(model)} · {stack}, layer {a.layer + 1}, head {a.head + 1} · query "
            f"“{label(a.query_tokens[a.query])}”<br>{step}")
