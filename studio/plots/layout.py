"""What every studio figure shares: the look (font, template, title), token labels, token
axes, the blank figure that says why it is blank, and the layout each figure carries for a phone.

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

import plotly.graph_objects as go
from plotly.subplots import make_subplots

FONT = dict(family="DejaVu Sans, Arial, sans-serif", size=14, color="#111")
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


def styled(fig: go.Figure, title: str, height: int, **kwargs) -> go.Figure:
    """fig with the studio's look: its title, height and template, its other layout (kwargs), and on a
    phone smaller type and a wrapped title."""
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


def token_axis(tokens: Sequence[str], max_labels: int = 60, **kwargs) -> dict:
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
    return styled(fig, "", height)
