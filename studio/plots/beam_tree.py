"""The Beam search tab's search tree: every hypothesis considered, kept, finished or pruned."""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .layout import LINE_PX, hover_text, label, narrow, styled, title_room, word_start_note

NODE_STYLE = {  # status -> (name in legend, marker)
    # The root's white ring keeps it visible on the dark theme too.
    "root": ("start", dict(symbol="circle", size=12, color="#111", line=dict(color="#fff", width=1.5))),
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
        _add_best_path(fig, nodes, best)
    flipped_y = _flipped_y(nodes)
    flips = {**_add_edges(fig, nodes, flipped_y), **_add_nodes(fig, nodes, flipped_y)}
    _add_this_step(fig, nodes, current_step, best)
    _lay_out(fig, nodes, best, flips)
    return fig


def _add_best_path(fig: go.Figure, nodes: Sequence[dict], best: tuple) -> None:
    path = sorted((n for n in nodes if best[:len(n["key"])] == n["key"]), key=lambda n: n["step"])
    fig.add_trace(go.Scatter(x=[n["step"] for n in path], y=[n["y"] for n in path], mode="lines",
                             name="best translation", hoverinfo="skip", legendrank=len(NODE_STYLE),
                             line=dict(color="#fdb863", width=12)))


def _flipped_y(nodes: Sequence[dict]) -> dict[int, float]:
    """Each node's y (by id()) where words alternate above and below their markers (see _lay_out): an
    odd step's pruned marks fan out above their parent's row instead, as below it they lay under that
    step's words."""
    return {id(n): 2 * n["parent_y"] - n["y"] if n["status"] == "pruned" and n["step"] % 2 else n["y"]
            for n in nodes if n["parent_y"] is not None}


def _add_edges(fig: go.Figure, nodes: Sequence[dict], flipped_y: dict[int, float]) -> dict[int, list]:
    """The pruned children's dotted edges, then the kept ones'; returns {trace index: its y values with
    the odd steps' pruned marks flipped}."""
    flips = {}
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
    return flips


def _add_nodes(fig: go.Figure, nodes: Sequence[dict], flipped_y: dict[int, float]) -> dict[int, list]:
    """A marker trace per status, its tokens above the markers (pruned: on hover only); pruned marks
    first, under the others' words, while the legend keeps NODE_STYLE's order. Returns the pruned
    trace's flipped y values, as _add_edges does."""
    flips = {}
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
    return flips


def _add_this_step(fig: go.Figure, nodes: Sequence[dict], current_step: int, best: tuple | None) -> None:
    """A ring around what this step chose, as its own trace (rings on the node traces' points would draw
    the first point's ring in the legend too), and the step's column shaded. Once the search is done the
    band tells its story: the last step's rings and shade would point at whichever hypotheses finished
    last, not at the result."""
    chosen = [] if best is not None else [n for n in nodes if n["step"] == current_step
                                           and n["status"] in ("live", "finished")]
    fig.add_trace(go.Scatter(x=[n["step"] for n in chosen], y=[n["y"] for n in chosen], mode="markers",
                             marker=dict(symbol="circle-open", size=21, color="#d95f02", line=dict(width=3)),
                             hoverinfo="skip", showlegend=False))
    if current_step > 0 and best is None:  # unlabelled: any label in the column would sit on a word
        fig.add_vrect(x0=current_step - 0.4, x1=current_step + 0.4, fillcolor="#fdd0a2", opacity=0.35,
                      line_width=0, layer="below")  # under the markers and words, which it faded


def _lay_out(fig: go.Figure, nodes: Sequence[dict], best: tuple | None, flips: dict[int, list]) -> None:
    """Axes, title and height, on a wide screen and on a phone. flips: the y values of the traces whose
    odd steps' pruned marks move above their parent where words alternate above and below."""
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
    styled(fig, title, int(rows_px * 1.5) if crowded else rows_px, margin=dict(l=30, r=30, t=100, b=60),
           legend=dict(orientation="h", x=0, y=1, yanchor="bottom"))
    # On a phone the legend takes two columns, three rows under the title's lines; the words are smaller.
    words = {f"data[{i}].{path}": value for i, positions in alternating.items()
             for path, value in (("textposition", positions), ("textfont.size", 11))}
    words.update({f"data[{i}].y": ys for i, ys in flips.items()})
    narrow(fig, **{"legend.entrywidth": 0.5, "legend.entrywidthmode": "fraction",
                   "margin.t": title_room(title) + 3 * LINE_PX + 10, "height": int(rows_px * 1.5), **words})
