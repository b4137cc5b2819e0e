"""Plotly figures for the studio. Pure functions: numbers and token strings in, figures out.

Token labels go through ``label`` (plotly renders a subset of HTML in text, so "<eos>"
would vanish and user text could become markup); axes are numeric with tick labels, so
a token that occurs twice keeps two rows.
"""
from __future__ import annotations

import functools
import html
import math
import re
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

FONT = dict(family="DejaVu Sans, Arial, sans-serif", size=14, color="#111")
ATTENTION_SCALE = "Blues"
WORD_START, SHOWN_WORD_START = "\u2581", "\u2423"  # the tokenizer's metaspace; the visible-space sign
_AXIS = dict(gridcolor="#e5e5e5", linecolor="#999", zerolinecolor="#ccc")
# A small template of our own: applying "plotly_white" costs ~0.1 s per figure.
TEMPLATE = go.layout.Template(layout=dict(font=FONT, paper_bgcolor="white", plot_bgcolor="white",
                                          xaxis=_AXIS, yaxis=_AXIS))


def shown(token: str) -> str:
    """A token as plain text, its word-start marker "▁" written "␣" (in most fonts "▁" is a bar on
    the baseline that reads as "_")."""
    return str(token).replace(WORD_START, SHOWN_WORD_START)


def label(token: str) -> str:
    """A token (or any text) as plot text on white: escaped, the word-start marker a grey "␣"."""
    grey_marker = f'<span style="color:#999">{SHOWN_WORD_START}</span>'
    return html.escape(str(token), quote=False).replace(WORD_START, grey_marker)


def hover_text(token: str) -> str:
    """A token for a hover box, which takes its trace's colour: there a grey marker would vanish."""
    return html.escape(shown(token), quote=False)


def word_start_note(tokens: Sequence[str]) -> str:
    """A title's note "; ␣ starts a word", if any of tokens has the marker (word-level tokenizers have none)."""
    return f"; {SHOWN_WORD_START} starts a word" if any(WORD_START in t for t in tokens) else ""


def _layout(fig: go.Figure, title: str, height: int, **kwargs) -> go.Figure:
    kwargs.setdefault("margin", dict(l=70, r=30, t=60, b=60))
    fig.update_layout(title=dict(text=title, x=0.01), height=height, template=TEMPLATE, **kwargs)
    # On a phone: smaller type, and a long title on as many lines as it needs, the plot lower by as many.
    narrow(fig, **{"font.size": NARROW_FONT, "title.font.size": NARROW_TITLE_FONT})
    wrapped = wrap(title)
    lines = wrapped.count("<br>")
    if lines:
        narrow(fig, **{"title.text": wrapped, "title.y": 1, "title.yref": "container", "title.yanchor": "top",
                       "title.pad.t": TITLE_TOP, "margin.t": max(kwargs["margin"]["t"] + LINE_PX * lines,
                                                                 title_room(title))})
    return fig


# ----- on a phone ---------------------------------------------------------------------------
# A figure cannot know the width it will be drawn at, so a figure that needs another layout on a
# phone carries it, as plotly attribute paths ("data[i]...." for trace i's), in layout.meta["narrow"]:
# the page's script (static/page_plots.js) applies them before drawing when the page is narrower than
# NARROW_PX: a phone, and also a laptop's 1366 px at 200% zoom (683 px), where the wide layouts cut
# their titles off.
NARROW_PX = 800
NARROW_FONT = 12  # px, for FONT's 14
NARROW_TITLE_FONT = 14  # px; plotly's default is 1.4 times the font
NARROW_CHARS = 34  # characters of the title's type that fit a line across a phone's plot
LINE_PX = 18  # one line of a title
TITLE_TOP = 40  # px above a wrapped title: Gradio writes the plot's label in the top left corner


def title_room(title: str) -> int:
    """The top margin a title wrapped for a phone needs, below Gradio's label."""
    return TITLE_TOP + LINE_PX * (wrap(title).count("<br>") + 1) + 12


def narrow(fig: go.Figure, **changes) -> None:
    """Add layout changes (plotly attribute paths) to the figure's layout for a phone."""
    meta = dict(fig.layout.meta or {})
    meta["narrow"] = {**meta.get("narrow", {}), **changes}
    fig.update_layout(meta=meta)


def wrap(text: str, width: int = NARROW_CHARS) -> str:
    """text (plotly's HTML subset) broken into lines of at most width visible characters, at spaces
    outside tags."""
    if "<br>" in text:  # lines of its own: each wrapped alone
        return "<br>".join(wrap(part, width) for part in text.split("<br>"))
    lines, line, seen = [], "", 0
    for word in re.split(r" (?![^<]*>)", text):
        visible = len(re.sub(r"<[^>]+>", "", html.unescape(word)))
        if line and seen + 1 + visible > width:
            lines.append(line)
            line, seen = word, visible
        else:
            line, seen = (f"{line} {word}", seen + 1 + visible) if line else (word, visible)
    return "<br>".join(lines + [line])


def stacked(fig: go.Figure, rows: int, cols: int, height: int, vertical_spacing: float,
            titles: Sequence[str] | None = None) -> None:
    """On a phone, a rows × cols grid of subplots (made by make_subplots, titles given) as one column:
    the narrow layout takes each panel's place in a one-column grid of the same panels. titles: the
    panels' titles there, if the grid's are too long for a phone."""
    n = rows * cols
    titles = tuple(titles or (a.text for a in fig.layout.annotations[:n]))
    if len(titles) != n or not all(titles):  # make_subplots writes no annotation for an empty title
        raise ValueError(f"stacked needs a title for each of the {n} panels, got {titles}")
    changes = {"height": height}
    for i, (x_domain, y_domain, title_x, title_y) in enumerate(_column(n, titles, vertical_spacing)):
        suffix = "" if i == 0 else str(i + 1)
        changes.update({f"xaxis{suffix}.domain": x_domain, f"yaxis{suffix}.domain": y_domain,
                        f"xaxis{suffix}.showticklabels": True, f"annotations[{i}].text": titles[i],
                        f"annotations[{i}].x": title_x, f"annotations[{i}].y": title_y})
    narrow(fig, **changes)


@functools.lru_cache(maxsize=8)
def _column(n: int, titles: tuple[str, ...], vertical_spacing: float) -> list[tuple[list, list, float, float]]:
    """Each panel's x and y domain and title position in a one-column grid of n (a live plot's every
    update asks again: make_subplots takes ~15 ms)."""
    column = make_subplots(rows=n, cols=1, subplot_titles=titles, vertical_spacing=vertical_spacing)
    axes = [("xaxis", "yaxis")] + [(f"xaxis{i}", f"yaxis{i}") for i in range(2, n + 1)]
    return [(list(column.layout[x].domain), list(column.layout[y].domain), title.x, title.y)
            for (x, y), title in zip(axes, column.layout.annotations)]


def _token_axis(tokens: Sequence[str], max_labels: int = 60, **kwargs) -> dict:
    """An axis with a token at each whole position. Past max_labels tokens (a long source), only every
    k-th is written, so the labels stay readable; the axis title says so, and hovering names each one."""
    every = math.ceil(len(tokens) / max_labels) if tokens else 1
    if every > 1 and "title" in kwargs:
        kwargs["title"] = f"{kwargs['title']} (one in {every} labelled)"
    # automargin: a long slanted label ("␣orangefarbenen") widens the margin instead of being cut off by it.
    return dict(tickmode="array", tickvals=list(range(0, len(tokens), every)),
                ticktext=[label(t) for t in tokens[::every]], automargin=True, **kwargs)


def empty(message: str, height: int = 300) -> go.Figure:
    """A blank figure that says why it is blank."""
    fig = go.Figure()
    fig.add_annotation(text=label(message), showarrow=False, font=dict(size=16),  # the figure's colour: either theme
                       xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    narrow(fig, **{"annotations[0].text": wrap(label(message), 32)})
    return _layout(fig, "", height)


# ----- Translate ------------------------------------------------------------------------
def token_probabilities(tokens: Sequence[str], logprobs: Sequence[float], ceiling: float | None = None) -> go.Figure:
    """One bar per output token: the probability the model gave it when it was chosen. ceiling: the
    probability label smoothing trained the model to give the right word (1 - eps + eps/V), drawn as a
    line: a student asks why a model sure of every word stops near 0.9."""
    probs = np.exp(np.asarray(logprobs, dtype=float))
    labels = [hover_text(t) for t in tokens]
    fig = go.Figure(go.Bar(
        x=list(range(len(tokens))), y=probs, marker_color=np.where(probs < 0.5, "#d95f02", "#1b6ca8"),
        customdata=np.stack([labels, [f"{lp:.3f}" for lp in logprobs]], axis=-1) if len(tokens) else None,
        hovertemplate="%{customdata[0]}<br>p = %{y:.3f}<br>log p = %{customdata[1]}<extra></extra>"))
    fig.update_xaxes(_token_axis(tokens, tickangle=-45))
    fig.update_yaxes(range=[0, 1.02], title="p(token | prefix, source)")
    title = f"Probability of each output token (orange: below 0.5{word_start_note(tokens)})"
    _layout(fig, title, 380)
    if ceiling is not None:
        # The note above the plot, right-aligned: by the line, a sure model's bars (most above 0.9) covered it.
        note = f"dashed: {ceiling:.2f}, label smoothing's target (5.4)"
        fig.add_hline(y=ceiling, line=dict(color="#777", width=1, dash="dash"))
        fig.add_annotation(text=note, xref="paper", yref="paper", x=1, y=1.01, xanchor="right", yanchor="bottom",
                           showarrow=False, font=dict(size=12, color="#555"))
        # On a phone the title takes the whole width: the note joins it, on a line of its own.
        both = f"{title}<br>{note}"
        narrow(fig, **{"annotations[0].visible": False, "title.text": wrap(both), "title.y": 1,
                       "title.yref": "container", "title.yanchor": "top", "title.pad.t": TITLE_TOP,
                       "margin.t": title_room(both)})
    return fig


# ----- Attention ------------------------------------------------------------------------
def _pairs(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    """(Q, K) hover text "query → key" of an attention map."""
    r, c = [hover_text(t) for t in rows], [hover_text(t) for t in cols]
    return np.array([[f"{q} → {k}" for k in c] for q in r], dtype=object)


def _heatmap(weights: np.ndarray, rows: Sequence[str], cols: Sequence[str], showscale: bool) -> go.Heatmap:
    return go.Heatmap(z=weights, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=ATTENTION_SCALE,
                      zmin=0.0, zmax=1.0, showscale=showscale, customdata=_pairs(rows, cols),
                      hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>")


# Beyond this many cells the grid's hover names no tokens (the large view below does): a label per cell
# made a 255-token source's encoder grid 28 MB of JSON, seconds to send and to draw.
GRID_HOVER_CELLS = 100_000


SLIM_COLORBAR = {"data[0].colorbar.thickness": 8, "data[0].colorbar.xpad": 4, "data[0].colorbar.tickvals": [0, 0.5, 1]}


def attention_grid(maps: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str,
                   column_names: Sequence[str]) -> go.Figure:
    """maps (layers, columns, Q, K): a block per layer (rows) and head (columns), drawn as one
    heatmap with blank gaps between blocks (one trace renders far faster than a subplot each)."""
    n_layers, n_cols, q, k = maps.shape
    z = np.full((n_layers * (q + 1) - 1, n_cols * (k + 1) - 1), np.nan, dtype=np.float32)
    labelled = maps.size <= GRID_HOVER_CELLS
    hover = np.full(z.shape, "", dtype=object) if labelled else None
    pairs = _pairs(rows, cols) if labelled else None
    for l in range(n_layers):
        for h in range(n_cols):
            block = np.s_[l * (q + 1):l * (q + 1) + q, h * (k + 1):h * (k + 1) + k]
            z[block] = maps[l, h]
            if labelled:
                hover[block] = f"L{l + 1} {column_names[h]}: " + pairs
    template = ("%{customdata}<br>weight %{z:.3f}" if labelled else
                "weight %{z:.3f}<br>(tokens: in the large view below)") + "<extra></extra>"
    fig = go.Figure(go.Heatmap(z=z, customdata=hover, colorscale=ATTENTION_SCALE, zmin=0.0, zmax=1.0,
                               hoverongaps=False, hovertemplate=template))
    fig.update_xaxes(tickmode="array", tickvals=[h * (k + 1) + (k - 1) / 2 for h in range(n_cols)],
                     ticktext=list(column_names), side="top", showgrid=False, zeroline=False)
    fig.update_yaxes(tickmode="array", tickvals=[l * (q + 1) + (q - 1) / 2 for l in range(n_layers)],
                     ticktext=[f"layer {l + 1}" for l in range(n_layers)], autorange="reversed", showgrid=False,
                     zeroline=False)
    _layout(fig, title, 160 + 190 * n_layers, margin=dict(l=80, r=30, t=110, b=30))
    # Two lines at the top of the figure, clear of the head labels above the blocks (centred in the
    # margin, the title's second line touched "H1").
    fig.update_layout(title=dict(yref="container", y=1, yanchor="top", pad=dict(t=TITLE_TOP + 8)))
    narrow(fig, **SLIM_COLORBAR, **{"margin.l": 55, "margin.r": 10})  # on a phone the bar was as wide as a head
    return fig


def attention_head(weights: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str,
                   row_title: str, col_title: str) -> go.Figure:
    """One (Q, K) map large, with every token labelled."""
    fig = go.Figure(_heatmap(weights, rows, cols, showscale=True))
    size = max(len(rows), len(cols))
    height = int(min(900, max(420, 140 + 28 * size)))
    # Slanted labels need ~28 px each in presenter mode's type, whose plot is no wider: 36 across a
    # projector's ~1,000 px (60 overprinted there on a 255-token source).
    fig.update_xaxes(_token_axis(cols, max_labels=36, tickangle=-45, title=col_title))
    fig.update_yaxes(_token_axis(rows, max_labels=(height - 150) // 16, title=row_title, autorange="reversed"))
    _layout(fig, title, height, margin=dict(l=110, r=30, t=60, b=90))
    # On a phone a slim colour bar and upright source labels: the bar and its margins took a third of the
    # width, and 14 slanted labels overprinted in the 130 px left. (A bar across the bottom, placed in the
    # container, pushed the margins past the figure's height while its tab was hidden.)
    narrow(fig, **SLIM_COLORBAR, **{"margin.l": 40, "margin.r": 10, "xaxis.tickangle": -90})
    return fig


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
    return _layout(fig, f"PE for {table.shape[0]} positions × {table.shape[1]} dimensions{note}", 460)


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
    _layout(fig, title, 400)
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
    return _layout(fig, "Dot product PE(p)·PE(q): depends only on the distance |p − q|", 460)


# ----- Model ---------------------------------------------------------------------------
def parameter_shares(groups: dict[str, int]) -> go.Figure:
    """One bar per kind of part (embeddings, each attention, feed-forward, LayerNorms), largest first."""
    total = sum(groups.values()) or 1
    names = sorted(groups, key=groups.get)  # a horizontal bar chart draws its first bar at the bottom
    fig = go.Figure(go.Bar(x=[groups[n] for n in names], y=names, orientation="h", marker_color="#1b6ca8",
                           text=[f"{groups[n]:,} ({100 * groups[n] / total:.1f}%)" for n in names],
                           textposition="outside", cliponaxis=False, hoverinfo="skip"))
    fig.update_xaxes(title="parameters", range=[0, 1.3 * max(groups.values(), default=1)])
    _layout(fig, f"Where the {total:,} parameters are", 120 + 34 * len(groups), margin=dict(l=230, r=30, t=60, b=60))
    # On a phone, long names on two lines ("Decoder masked" over "self-attention") in a narrower margin, and a
    # longer axis: the bars keep some width, and the shares written beside them stay on the plot.
    narrow(fig, **{"height": 120 + 44 * len(groups), "margin.l": 105, "font.size": 10, "xaxis.range": [0, 2.4 * max(groups.values(), default=1)],
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
    return _layout(fig, title, 400, margin=dict(l=70, r=30, t=90, b=60),
                   legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"))


def label_smoothing(dist: np.ndarray, tokens: Sequence[str], target: int, eps: float) -> go.Figure:
    colors = ["#1b6ca8" if i == target else "#9ecae1" for i in range(len(tokens))]
    # Each bar's value written on it: on a log axis 0.9 and 0.7 look alike.
    fig = go.Figure(go.Bar(x=list(range(len(tokens))), y=dist, marker_color=colors,
                           texttemplate="%{y:.2g}", textposition="outside", cliponaxis=False,
                           hovertemplate="%{y:.5f}<extra></extra>"))
    fig.update_xaxes(_token_axis(tokens, tickangle=-45))
    # One tick a decade, as powers of ten: plotly's SI prefixes wrote 0.0001 as "100μ". The axis ends just
    # above 1 (left to itself, ε = 0's lone bar at 1 got an axis from 0.1 to 10).
    lowest = float(dist[dist > 0].min()) if (dist > 0).any() else 1.0
    fig.update_yaxes(title="target probability", type="log", dtick=1, exponentformat="power",
                     range=[min(math.floor(math.log10(lowest)), -1) - 0.2, 0.1])
    _layout(fig, f"Label-smoothed target (ε = {eps:g}): reference token in dark blue", 380)
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
    fig.update_xaxes(_token_axis(tgt_tokens, tickangle=-45), row=1, col=2)
    fig.update_yaxes(_token_axis(tgt_tokens, autorange="reversed"), row=1, col=2)
    # On a phone, one mask above the other, each titled on two lines.
    stacked(fig, 1, 2, 860, vertical_spacing=0.2,
            titles=["Source padding mask<br>(position × sentence)", "Decoder causal mask<br>(query × key)"])
    title = "Masks of an example batch (blue: may attend, grey: masked)"
    _layout(fig, title, 420)
    narrow(fig, **{"margin.t": title_room(title) + 2 * LINE_PX})
    return fig


# ----- Beam search ------------------------------------------------------------------------
NODE_STYLE = {  # status -> (name in legend, marker)
    "root": ("start", dict(symbol="circle", size=12, color="#111", line=dict(color="#fff", width=1.5))),  # dark theme too
    "live": ("kept (live)", dict(symbol="circle", size=13, color="#1b6ca8")),
    "finished": ("finished (<eos>)", dict(symbol="star", size=17, color="#1a9850")),
    "pruned": ("pruned", dict(symbol="x", size=8, color="#b0b0b0")),
}


CROWDED_STEPS = 14  # about 1,150 px of plot across 15+ steps: under 75 px, ~9 characters, a step


def beam_tree(nodes: Sequence[dict], current_step: int, best: tuple | None = None) -> go.Figure:
    """nodes: dicts with key (the token ids from the root), step, y (in rows), parent_y (None for
    the root), token, status, token_logprob, logprob, score. Edges run from parent to child; the
    current step's column is shaded. A node's token is written above it. best: the key of the
    search's result, once it is done; its path from the root is drawn as a broad band."""
    fig = go.Figure()
    if best is not None:  # first, so that the edges and markers lie on top of it
        path = sorted((n for n in nodes if best[:len(n["key"])] == n["key"]), key=lambda n: n["step"])
        fig.add_trace(go.Scatter(x=[n["step"] for n in path], y=[n["y"] for n in path], mode="lines",
                                 name="best translation", hoverinfo="skip", legendrank=len(NODE_STYLE),
                                 line=dict(color="#fdb863", width=12)))
    # Where words alternate above and below their markers (see below), an odd step's pruned marks fan out
    # above their parent's row instead: below it they lay under that step's words.
    flipped_y = {id(n): 2 * n["parent_y"] - n["y"] if n["status"] == "pruned" and n["step"] % 2 else n["y"]
                 for n in nodes if n["parent_y"] is not None}
    flips = {}  # trace index -> its y values with the odd steps' pruned marks flipped
    for kept, color, dash in ((False, "#d0d0d0", "dot"), (True, "#5a8fc0", "solid")):
        xs, ys, flipped = [], [], []
        for n in nodes:
            if n["parent_y"] is not None and (n["status"] != "pruned") == kept:
                xs += [n["step"] - 1, n["step"], None]
                ys += [n["parent_y"], n["y"], None]
                flipped += [n["parent_y"], flipped_y[id(n)], None]
        if not kept:
            flips[len(fig.data)] = flipped
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color=color, width=2 if kept else 1, dash=dash)))
    # Pruned marks first, under the others' words; the legend keeps NODE_STYLE's order.
    for status in sorted(NODE_STYLE, key=lambda s: s != "pruned"):
        name, marker = NODE_STYLE[status]
        group = [n for n in nodes if n["status"] == status]
        if not group:
            continue
        if status == "pruned":
            flips[len(fig.data)] = [flipped_y[id(n)] for n in group]
        fig.add_trace(go.Scatter(
            x=[n["step"] for n in group], y=[n["y"] for n in group], name=name,
            legendrank=list(NODE_STYLE).index(status),
            mode="markers" if status == "pruned" else "markers+text",  # pruned: token on hover only
            text=[label(n["token"]) for n in group], textposition="top center", textfont=dict(size=13),
            cliponaxis=False,  # the root's "<bos>" reaches past step 0's half-step into the margin
            marker=marker,
            customdata=[[hover_text(n["token"]), n["token_logprob"], n["logprob"], n["score"]] for n in group],
            hovertemplate=("%{customdata[0]}<br>log p(token) %{customdata[1]:.3f}<br>cumulative log p "
                           "%{customdata[2]:.3f}<br>normalised score %{customdata[3]:.3f}<extra>" + name + "</extra>")))
    # A ring around what this step chose, as its own trace: rings on the node traces' points
    # would draw the first point's ring in the legend too.
    # Once the search is done the band tells its story: the last step's rings and shade would point
    # at whichever hypotheses finished last, not at the result.
    chosen = [] if best is not None else [n for n in nodes if n["step"] == current_step
                                           and n["status"] in ("live", "finished")]
    fig.add_trace(go.Scatter(x=[n["step"] for n in chosen], y=[n["y"] for n in chosen], mode="markers",
                             marker=dict(symbol="circle-open", size=21, color="#d95f02", line=dict(width=3)),
                             hoverinfo="skip", showlegend=False))
    if current_step > 0 and best is None:  # unlabelled: any label in the column would sit on a word
        fig.add_vrect(x0=current_step - 0.4, x1=current_step + 0.4, fillcolor="#fdd0a2", opacity=0.35,
                      line_width=0, layer="below")  # under the markers and words, which it faded
    last = max([n["step"] for n in nodes] + [1])
    fig.update_xaxes(title="step (output tokens so far)", dtick=1, range=[-0.5, last + 0.9])
    # Room above the top row for its words; below the bottom one for its pruned marks.
    top, bottom = min(n["y"] for n in nodes) - 0.9, max(n["y"] for n in nodes) + 0.7
    fig.update_yaxes(visible=False, range=[bottom, top])
    # A row holds a word above a marker: a wide beam's tree grows tall (to 2,600 px) rather than overprinting.
    note = word_start_note([n["token"] for n in nodes])
    shown = "band: the result" if best is not None else "shaded: this step; orange ring: chosen in it"
    title = f"Search tree ({shown}{note})"
    # 42 px a row: a chosen node's ring (21 px) and the 13 px word above the node below it (at 32 px, a
    # beam of 8's words sat on the rings above them).
    rows_px = int(min(2600, max(380, 160 + 42 * (bottom - top))))
    # Where a step is narrower than a word, words alternate above (even steps) and below (odd) their
    # markers, and rows lie further apart to hold a word on each side: on a phone (a step ~25 px), and on
    # a wide screen once a search has CROWDED_STEPS steps (under ~75 px a step: "␣individual␣stand" ran together).
    alternating = {i: ["top center" if step % 2 == 0 else "bottom center" for step in trace.x]
                   for i, trace in enumerate(fig.data) if trace.mode == "markers+text"}
    crowded = last >= CROWDED_STEPS
    if crowded:
        for i, positions in alternating.items():
            fig.data[i].textposition = positions
        for i, ys in flips.items():
            fig.data[i].y = ys
    _layout(fig, title, int(rows_px * 1.5) if crowded else rows_px, margin=dict(l=30, r=30, t=100, b=60),
            legend=dict(orientation="h", x=0, y=1, yanchor="bottom"))
    # On a phone the legend takes two columns, three rows under the title's lines; the words are smaller.
    words = {f"data[{i}].{path}": value for i, positions in alternating.items()
             for path, value in (("textposition", positions), ("textfont.size", 11))}
    words.update({f"data[{i}].y": ys for i, ys in flips.items()})
    narrow(fig, **{"legend.entrywidth": 0.5, "legend.entrywidthmode": "fraction",
                   "margin.t": title_room(title) + 3 * LINE_PX + 10, "height": int(rows_px * 1.5), **words})
    return fig


def cross_attention_rows(layers: Sequence[np.ndarray], source: Sequence[str], title: str) -> go.Figure:
    """layers: per decoder layer (heads, S). One row per layer and head, plus their mean on top."""
    rows = [np.mean([l.mean(axis=0) for l in layers], axis=0)]
    names = ["mean"]
    for i, layer in enumerate(layers):
        for h, weights in enumerate(layer):
            rows.append(weights)
            names.append(f"L{i + 1} H{h + 1}")
    fig = go.Figure(_heatmap(np.array(rows), names, source, showscale=True))
    fig.update_xaxes(_token_axis(source, tickangle=-45, title="source token"))
    fig.update_yaxes(_token_axis(names, autorange="reversed"))
    return _layout(fig, title, int(max(320, 140 + 30 * len(rows))), margin=dict(l=80, r=30, t=60, b=80))
