"""A view of the studio as an address a lecturer can hand out (issue 53): ``?tab=attention&model=...&source=...``.

``read_link`` turns a page's query parameters into a ``View`` for the models on offer, clamping what is out of
range and ignoring what it does not know, each said in a notice; ``link_of`` writes a View back. No Gradio here:
the tabs read a View when the page loads and write one for their "Copy link".
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping
from urllib.parse import urlencode

from core.explain.knockout import CLAIMS

# Each tab's slug: its label in lower case, spaces as hyphens.
TABS = ("translate", "what-if", "beam-search", "attention", "attention-arithmetic", "saliency", "positional-encoding",
        "model", "compare", "train", "knock-out", "word-choice")
PARTS = tuple(CLAIMS)  # the Knock out tab's parts (core.explain.knockout)
MAX_WORD_CHARS = 40  # a place ("decoder.2.cross") or a candidate word
STACKS = ("encoder", "decoder", "cross")
METHODS = ("beam", "greedy", "sample")
MAX_SOURCE_CHARS = 500  # a link carries a sentence or two, not a document
BEAM_SIZES = (1, 16)
MAX_NOTICES = 8
# Query parameters Gradio itself reads (the theme, the API page, its own deep links): not the studio's to refuse.
GRADIO_PARAMS = ("__theme", "view", "deep_link", "ui")
ALPHA = (0.0, 2.0)
# What a tab with sentences of its own holds as "drawn" while its link is being set: its other draws (for the model
# the page load offers) wait, so a draw of the tab's first sentences never lands over the link's.
LINK_PENDING = "a link will draw this tab"


def forget_drawn(drawn: object) -> object:
    """What a tab's "drawn" becomes when the model changes: None (draw afresh), unless a link is about to draw it."""
    return drawn if drawn == LINK_PENDING else None


@dataclass(frozen=True)
class Shape:
    """What a model allows a view to point at: its layers (per stack) and heads."""
    encoder_layers: int
    decoder_layers: int
    heads: int

    def layers(self, stack: str) -> int:
        return self.encoder_layers if stack == "encoder" else self.decoder_layers


@dataclass(frozen=True)
class View:
    """Everything a link names; None: the view's own default. Layers, heads, queries and steps count from 1."""
    tab: str = "translate"
    model: str | None = None
    source: str | None = None
    target: str | None = None
    stack: str | None = None
    layer: int | None = None
    head: int | None = None
    query: int | None = None
    step: int | None = None
    method: str | None = None
    beam: int | None = None
    alpha: float | None = None
    presenter: bool = False
    lesson: int | None = None  # the step of the studio's lesson this view is (lesson.py), from 1
    part: str | None = None  # Knock out: the part knocked out, and where (core's spelling, from 0: "decoder.2.cross")
    where: str | None = None
    second: str | None = None  # Knock out: a second sentence beside the source
    foil: str | None = None  # Word choice: the candidate the target's token is contrasted with
    notices: tuple[str, ...] = field(default=(), compare=False)


NAMES = tuple(f.name for f in fields(View) if f.name != "notices")


def read_link(params: Mapping[str, str], models: list[str], shape_of=None) -> View:
    """The View a page's query parameters name. models: the names on offer (an unknown model is ignored); shape_of:
    name -> Shape, to clamp layers and heads to the model shown (None: not clamped). Never raises: what cannot be
    used is left out, and each such thing is said in View.notices."""
    notices: list[str] = []
    values: dict = {}
    for key, raw in params.items():
        if key in GRADIO_PARAMS:
            continue
        if key not in NAMES:
            name = key if len(key) <= 40 and key.isidentifier() else _shown(key)  # a hostile key is quoted short
            notices.append(f"ignored {name}={_shown(raw)}: not a part of a view (known: {', '.join(NAMES)})")
            continue
        value, notice = _parse(key, str(raw), models)
        if notice:
            notices.append(notice)
        if value is not None:
            values[key] = value
    view = replace(View(), **values)
    if shape_of is not None and view.model is not None:
        view, clamped = _clamped(view, shape_of(view.model))
        notices += clamped
    if len(notices) > MAX_NOTICES:  # a link of a thousand unknown parameters says so in one line
        notices = notices[:MAX_NOTICES - 1] + [f"… and {len(notices) - MAX_NOTICES + 1} more ignored or changed"]
    return replace(view, notices=tuple(notices))


def link_of(view: View) -> str:
    """The query string of view ("?tab=attention&model=..."), its defaults left out."""
    pairs = [(name, getattr(view, name)) for name in NAMES if getattr(view, name) not in (None, False)]
    if view.tab == "translate":
        pairs = [p for p in pairs if p[0] != "tab"] or pairs
    return "?" + urlencode([(k, "1" if v is True else str(v)) for k, v in pairs])


def _parse(key: str, raw: str, models: list[str]) -> tuple[object | None, str | None]:
    """(the value of one parameter, or None; a notice if it was changed or ignored)."""
    if key == "tab":
        return (raw, None) if raw in TABS else (None, f"ignored tab={_shown(raw)}: tabs are {', '.join(TABS)}")
    if key == "model":
        offered = ", ".join(models)
        return (raw, None) if raw in models else (None, f"ignored model={_shown(raw)}: on offer are {offered}")
    if key == "part":
        return (raw, None) if raw in PARTS else (None, f"ignored part={_shown(raw)}: parts are {', '.join(PARTS)}")
    if key in ("where", "foil"):
        if len(raw) > MAX_WORD_CHARS:
            return None, f"ignored {key}={_shown(raw)}: longer than {MAX_WORD_CHARS} characters"
        return raw or None, None
    if key in ("source", "target", "second"):
        if len(raw) > MAX_SOURCE_CHARS:
            return raw[:MAX_SOURCE_CHARS], f"{key} cut to its first {MAX_SOURCE_CHARS} characters"
        return raw or None, None
    if key == "stack":
        return (raw, None) if raw in STACKS else (None, f"ignored stack={_shown(raw)}: stacks are {', '.join(STACKS)}")
    if key == "method":
        return (raw, None) if raw in METHODS else (None, f"ignored method={_shown(raw)}: {', '.join(METHODS)}")
    if key == "presenter":
        return raw in ("1", "true", "yes", "on"), None
    if key == "alpha":
        return _number(key, raw, float, *ALPHA)
    if key == "beam":
        return _number(key, raw, int, *BEAM_SIZES)
    return _number(key, raw, int, 1, 10_000)  # layer, head, query, step, lesson: bounded again where they apply


def _number(key: str, raw: str, kind: type, low: float, high: float) -> tuple[object | None, str | None]:
    try:
        value = kind(float(raw)) if kind is int else kind(raw)
    except (ValueError, OverflowError):
        return None, f"ignored {key}={_shown(raw)}: not a number"
    if value != value:  # NaN
        return None, f"ignored {key}={_shown(raw)}: not a number"
    clamped = min(max(value, low), high)
    return clamped, (f"{key} {_shown(raw)} clamped to {clamped}" if clamped != value else None)


def _clamped(view: View, shape: Shape) -> tuple[View, list[str]]:
    """view with its layer and head within the model's."""
    notices, values = [], {}
    bounds = {"layer": shape.layers(view.stack or "encoder"), "head": shape.heads}
    for key, high in bounds.items():
        value = getattr(view, key)
        if value is not None and value > high:
            values[key] = high
            notices.append(f"{key} {value} clamped to {high}: {view.model} has {high}")
    return replace(view, **values), notices


def _shown(raw: str) -> str:
    """A parameter's value as a notice quotes it: short, so that a hostile link cannot flood the page."""
    return repr(raw if len(raw) <= 40 else raw[:40] + "…")
