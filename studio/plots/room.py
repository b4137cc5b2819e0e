"""The class's answers to a lesson's question (issue 64): a bar per answer, counts only, the model's own answer
marked once it is revealed."""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .layout import label, styled

ROOM = "#2563eb"  # blue 600: the room's guesses
MODEL = "#c2410c"  # orange 700: the model's answer, once revealed
HORIZONTAL_AT = 12  # characters: longer answers (translations) are drawn as horizontal bars, their text readable


def room_answers(names: Sequence[str], counts: Sequence[int], model_answer: str | None = None) -> go.Figure:
    """How many pages gave each answer; model_answer (a name) in the model's colour, or none before the reveal."""
    total = sum(counts)
    colours = [MODEL if name == model_answer else ROOM for name in names]
    text = [str(c) if c else "" for c in counts]
    title = f"The room's answers: {total} page{'s' * (total != 1)}" + (
        "" if model_answer is None else " (orange: the model's)")
    wide = max((len(n) for n in names), default=0) > HORIZONTAL_AT
    shown = [label(n) for n in names]
    if wide:  # a translation reads along its bar; the first option on top
        bars = go.Bar(x=list(counts), y=shown, orientation="h", marker_color=colours, text=text,
                      textposition="outside", hovertemplate="%{y}: %{x}<extra></extra>")
        fig = go.Figure(bars)
        fig.update_yaxes(autorange="reversed", automargin=True)
        fig.update_xaxes(title="pages", range=[0, _headroom(counts)], dtick=_tick(counts))
        return styled(fig, title, 120 + 48 * len(names))
    bars = go.Bar(x=shown, y=list(counts), marker_color=colours, text=text, textposition="outside",
                  hovertemplate="%{x}: %{y}<extra></extra>")
    fig = go.Figure(bars)
    fig.update_yaxes(title="pages", range=[0, _headroom(counts)], dtick=_tick(counts))
    fig.update_xaxes(type="category", automargin=True)
    return styled(fig, title, 300)


def _headroom(counts: Sequence[int]) -> float:
    """The count axis's end: room above the longest bar for its number."""
    return max(max(counts, default=0), 1) * 1.15


def _tick(counts: Sequence[int]) -> int:
    """Whole pages, about five ticks."""
    return max(1, (max(counts, default=0) + 4) // 5)
