"""Deep links on the page (issue 53): a page opened on ``?tab=attention&model=...&source=...`` shows that view for
that sentence, already computed; "Link to this view" gives the address of what is on screen.

The link is read when the page loads (address.py parses it), and again when a class's page follows the lecturer to
another step or the Lesson panel's Next opens one (open_in_place.js changes the address in place and presses the
hidden #open-this-address: the page is not loaded again, issue 64); the tabs' own events then draw
the view, as they do after a click: the model is picked, the sentence translated on the Translate tab (every
explaining tab reads that translation), the tab selected and told it is on screen, its controls set from the link.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from urllib.parse import parse_qsl

import gradio as gr

from ..server import slots
from ..server.guard import guard
from ..server.limits import BATCHED, HEAVY, clamp_beam, clean_input
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Current, Shell
from ..tabs import beam, translate
from ..tabs.attention import STACKS
from ..text import md
from . import lesson_panel
from .address import LINK_PENDING, Shape, View, link_of, read_link
from .lesson import Lesson

# The tabs' ids (app.py) by their slug in a link: the label in lower case, spaces as hyphens.
TAB_IDS = {"translate": "translate", "what-if": "what-if", "beam-search": "beam", "attention": "attention",
           "attention-arithmetic": "arithmetic", "saliency": "saliency", "positional-encoding": "positional",
           "model": "model", "compare": "compare", "train": "train", "knock-out": "knockout",
           "word-choice": "word-choice"}
SLUGS = {tab_id: slug for slug, tab_id in TAB_IDS.items()}
STACK_LABELS = {stack: label for label, stack in STACKS.items()}
FORCED_SHOWN_ON = ("what-if", "attention", "attention-arithmetic", "saliency")  # the tabs that show a forced target


@dataclass
class Linked:
    """The page's parts a link sets: the tabs and the one on screen, the presenter switch, the Translate and Beam
    search tabs, and the Attention and Attention arithmetic tabs' stack, layer and head."""
    tabs: gr.Tabs
    on_screen: gr.State
    presenter: gr.Checkbox
    translated: translate.TranslateTab
    searched: beam.BeamTab
    attention: tuple[gr.Radio, gr.Slider, gr.Slider]
    arithmetic: tuple[gr.Radio, gr.Slider, gr.Slider, gr.Dropdown, gr.State]  # stack, layer, head, query, chosen
    # Tabs with sentences of their own (Knock out, Word choice), by slug: the View they show (a State: what "Link to
    # this view" writes), what their view on screen was drawn for (a State, LINK_PENDING while a link sets them) and
    # the steps, each an event's settings taking the link's View, that set and draw them.
    own_views: dict[str, tuple[gr.State, gr.State, list[dict]]] = field(default_factory=dict)


def shape_of(registry: ModelRegistry, name: str) -> Shape | None:
    """The layers and heads a link may point at in the model called name (None: it does not load)."""
    try:
        c = registry.get(name).model.config
    except UNAVAILABLE:
        return None
    return Shape(c.encoder_layers, c.decoder_layers, c.n_heads)


# The page's address as the page has it now (on load, the address it was loaded at; then a step's, in place).
ADDRESS_JS = "(picked, query) => [picked, window.location.search]"


def opened(registry: ModelRegistry, picked: str | None, query: str) -> tuple:
    """On load or on #open-this-address: the page's link (its address's query, as ADDRESS_JS sends it) read into a
    View, and every part it sets (gr.skip() where it names nothing)."""
    params = dict(parse_qsl(query.lstrip("?")))
    if not params:
        return (None, *(gr.skip(),) * 17)
    view = read_link(params, registry.names(), lambda name: shape_of(registry, name) or Shape(10_000, 10_000, 10_000))
    tab_id = TAB_IDS[view.tab]
    model = view.model or picked
    stack = STACK_LABELS.get(view.stack or "", gr.skip())
    layer, head = (gr.skip() if value is None else value for value in (view.layer, view.head))
    said = "\n".join(f"- {md(n)}" for n in view.notices)
    source = view.source if view.source is not None else gr.skip()
    named = any(value is not None for value in (view.stack, view.layer, view.head, view.query))
    chosen = {"query": None if view.query is None else view.query - 1} if named else gr.skip()
    return (replace(view, model=model), gr.Tabs(selected=tab_id), tab_id, model or gr.skip(),
            True if view.presenter else gr.skip(), source, view.method or gr.skip(), said and f"**This link:**\n{said}",
            stack, layer, head, stack, layer, head, chosen, view.source or gr.skip(),
            gr.skip() if view.beam is None else view.beam, gr.skip() if view.alpha is None else view.alpha)


def translate_linked(registry: ModelRegistry, view: View | None, *inputs) -> tuple:
    """The link's sentence translated as the Translate tab would (nothing to do without one). A link's target is
    then the pair's target, as What if's "Show in Attention tab" makes it: What if scores it, and the Attention,
    Attention arithmetic and Saliency tabs show that pair."""
    if view is None or not view.source:
        return (gr.skip(),) * 5
    *shown, current = translate.translate(registry, *inputs)
    if view.target and isinstance(current, Current) and current.bundle is not None:
        current = replace(current, forced=current.bundle.target_tokenizer.encode(view.target))
    return (*shown, current)


def search_linked(registry: ModelRegistry, shown: int, view: View | None, search, choice: str | None,
                  *settings) -> tuple:
    """The Beam search tab's search, `step` steps on (1 without one), when the link opens that tab; shown: how many
    parts its page draws (beam.BeamTab.shown)."""
    if view is None or view.tab != "beam-search" or not view.source:
        return (gr.skip(),) * (1 + shown)
    model, source, beam_size, alpha, *rest = settings  # beam.BeamTab.settings; the boxes show the link's values
    beam_size = view.beam if view.beam is not None else beam_size
    alpha = view.alpha if view.alpha is not None else alpha
    return beam.steps_to(registry, view.step or 1, choice, model, source, beam_size, alpha, *rest)


def link_here(tab_id: str, model: str | None, current: Current | None, presenter: bool, method: str,
              beam_source: str, search: beam.Search | None, beam_size: float | str | None, alpha: float,
              att_stack: str, att_layer: float, att_head: float, ar_stack: str, ar_layer: float, ar_head: float,
              ar_query: int | None, *own_views: View | None) -> str:
    """The address (from "?") of the view on screen: the tab, the model, the sentence (with the Translate tab's
    decoding method that wrote its translation, and a target What if forced), the tab's own controls; a tab with
    sentences of its own gives its View (own_views)."""
    slug = SLUGS.get(tab_id, "translate")
    own = next((v for v in own_views if v is not None and v.tab == slug), None)
    if own is not None:
        return link_of(replace(own, model=model, presenter=bool(presenter)))
    if slug == "beam-search":
        shown = search is not None and search.key[:2] == (model, clean_input(beam_source or "")[0])
        steps = len(search.views) - 1 if shown else None  # the steps taken in the search on screen
        return link_of(View(tab=slug, model=model, source=beam_source or None, presenter=bool(presenter),
                            step=steps or None, beam=clamp_beam(beam_size)[0], alpha=float(alpha)))
    source = current.source if current else None
    forced = current.forced if current and current.bundle is not None and slug in FORCED_SHOWN_ON else None
    view = View(tab=slug, model=model, source=source or None, presenter=bool(presenter),
                method=method if source and method != "beam" else None,
                target=None if forced is None else current.bundle.target_tokenizer.decode(forced))
    if slug == "attention":
        view = replace(view, stack=STACKS.get(att_stack), layer=int(att_layer), head=int(att_head))
    elif slug == "attention-arithmetic":
        view = replace(view, stack=STACKS.get(ar_stack), layer=int(ar_layer), head=int(ar_head),
                       query=None if ar_query is None else int(ar_query) + 1)
    return link_of(view)


def _pending(slug: str, view: View | None) -> str | object:
    """LINK_PENDING for the tab the link opens (its own steps draw it), else nothing changes."""
    return LINK_PENDING if view is not None and view.tab == slug else gr.skip()


FULL_ADDRESS_JS = "(query) => query ? window.location.origin + window.location.pathname + query : query"


def wire(shell: Shell, parts: Linked, notices: gr.Markdown, link_box: gr.Textbox, copy: gr.Button,
         after_load: list[dict], lesson: tuple[Lesson, lesson_panel.LessonPanel] | None = None) -> None:
    """The load that reads the link (then the lesson panel's step, after_load, the page's own load steps, in order,
    then the view), and "Link to this view"."""
    registry, view = shell.registry, gr.State(None)
    att, ar, searched = parts.attention, parts.arithmetic, parts.searched
    address = gr.Textbox(elem_classes="class-offscreen")  # the address's query, as ADDRESS_JS reads it
    open_address = gr.Button("Open this address", elem_id="open-this-address", elem_classes="class-offscreen")

    loaded = gr.on([shell.demo.load, open_address.click], guard(partial(opened, registry)),
                   inputs=[shell.model, address], js=ADDRESS_JS, api_visibility="private",
                   outputs=[view, parts.tabs, parts.on_screen, shell.model, parts.presenter, parts.translated.source,
                            parts.translated.method, notices, *att, ar[0], ar[1], ar[2], ar[4], searched.source,
                            searched.beam_size, searched.alpha],
                   show_progress="hidden")
    for slug, (_, drawn, _) in parts.own_views.items():  # before the model is offered, whose change redraws them
        loaded = loaded.then(partial(_pending, slug), inputs=view, outputs=drawn, show_progress="hidden")
    if lesson is not None:
        loaded = loaded.then(partial(lesson_panel.shown, lesson[0]), inputs=view, outputs=lesson[1].outputs,
                             show_progress="hidden")
    for step in after_load:
        loaded = loaded.then(**step)
    loaded.then(guard(partial(translate_linked, registry)), inputs=[view, *parts.translated.inputs],
                outputs=parts.translated.outputs, **BATCHED).then(
        guard(slots.in_a_slot(partial(search_linked, registry, len(searched.shown)))),
        inputs=[view, searched.search, searched.choice, *searched.settings],
        outputs=[searched.search, *searched.shown], **HEAVY)
    for _, _, steps in parts.own_views.values():  # the link's view first, then the tab's first draw
        chain = loaded.then(guard(steps[0]["fn"]), inputs=view,
                            **{k: v for k, v in steps[0].items() if k not in ("fn", "inputs")})
        for step in steps[1:]:
            chain = chain.then(**step)
    copy.click(link_here, inputs=[parts.on_screen, shell.model, parts.translated.current, parts.presenter,
                                  parts.translated.method, searched.source, searched.search, searched.beam_size,
                                  searched.alpha, *att, *ar[:4], *(shown for shown, _, _ in parts.own_views.values())],
               outputs=link_box,
               show_progress="hidden",
               api_visibility="private").then(None, inputs=link_box, outputs=link_box, js=FULL_ADDRESS_JS)
