"""Beam search, one step at a time (section 6.1: beam 4, α 0.6): the search tree, the live and
finished hypotheses with their scores, and the cross-attention behind each choice.

The stepper lives in a gr.State, one per browser session; the views of the steps taken so far
are kept beside it so the tree can be drawn.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from functools import partial

import gradio as gr
import plotly.graph_objects as go

from core.bundle import ModelBundle
from core.data.tokenizer import EOS_ID
from core.inference.stepwise_beam import BeamStepper, StepView
from core.inference.translation import translate_detailed

from .. import plots
from ..components import Slider, script
from ..numbers.beam_tree import decode_options, hypotheses, table, tree_nodes
from ..server import slots
from ..server.guard import guard
from ..server.limits import (BEAM_RANGE, DEFAULT_BEAM, HEAVY, beam_search_megabytes, budget_words, clamp_beam,
                              clean_input)
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Current, Shell, picked_examples
from ..text import clip, info, md, md_table

TABLE_HEADERS = ["hypothesis", "cumulative log p", "normalised score", "tokens"]
TABLE_CAPTION = "Hypotheses at this step (live: still growing; finished: ended with <eos>)"
SETTINGS_CHANGED = ("*Settings changed: Step or Run to end starts a new search with them (shown: the previous "
                    "search, which Back still walks).*")


# The page after Back or Reset: the tree brought into view; after Step or Run to end, the same, or with
# nothing to search the sentence box focused.
SHOW_TREE_JS = script("beam_show_tree.js")
SHOW_TREE_OR_SOURCE_JS = script("beam_show_tree_or_source.js")
# → Step, ← Back (and a clicker's Page Down / Page Up) on this tab: run once when the page loads (app.page_js).
STEP_KEYS_JS = script("beam_step_keys.js")


@dataclass
class Search:
    """A session's beam search: the settings it was started with and every step's view."""

    key: tuple
    stepper: BeamStepper
    views: list[StepView] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # what was changed in the input, and why
    model_key: tuple | None = None  # the model's registry key: a new training run under its name is another model
    compared: tuple[str, str, str] | None = None  # comparison() once done: the Translate tab's run is decoded once
    # The weights searched with (start() sets them): a live training run publishes new ones under the
    # same name meanwhile.
    bundle: ModelBundle | None = None
    # Step, Back and Run are separate events (two may run at once): → then ← pressed during a step
    # interleaved step() with back(), and views no longer followed the stepper's history.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def view(self) -> StepView:
        return self.views[-1]


class Refused(Exception):
    """Nothing to search, and why: said on the page, where the search would be."""


def start(registry: ModelRegistry, name: str | None, text: str, beam_size: float | str | None, alpha: float,
          penalty: str, max_extra: float) -> Search:
    """A fresh search for the inputs (Refused when there is nothing to search). What was changed in
    the input (a beam size, a cut source) goes to the search's notices, on the page (not as toasts:
    they covered the controls)."""
    text, cleaned = clean_input(text)
    if not text or not text.strip():
        raise Refused("Type a source sentence first (or pick an example).")
    size, notice = clamp_beam(beam_size)
    try:
        model_key, bundle = registry.key(name), registry.get(name)
        stepper = BeamStepper(bundle, text, decode_options(size, alpha, penalty, max_extra))
    except UNAVAILABLE as exc:
        raise Refused(f"Cannot search: {exc}") from None
    notices = [clip(n, 300) for n in cleaned + ([notice] if notice else []) + stepper.notices]
    return Search((name, text, size, float(alpha), penalty, int(max_extra)), stepper, [stepper.view], notices,
                  model_key, bundle=bundle)


def _started_with(search: Search | None, registry: ModelRegistry, name, text, beam_size, alpha, penalty,
                  max_extra) -> bool:
    """Whether search was started with these inputs (and the model now under that name)."""
    key = (name, clean_input(text)[0], clamp_beam(beam_size)[0], float(alpha), penalty, int(max_extra))
    return search is not None and search.key == key and search.model_key == registry.key(name)


def _current(search: Search | None, registry: ModelRegistry, name, text, beam_size, alpha, penalty,
             max_extra) -> Search | None:
    """search if it was started with these inputs, else a fresh one."""
    if _started_with(search, registry, name, text, beam_size, alpha, penalty, max_extra):
        return search
    return start(registry, name, text, beam_size, alpha, penalty, max_extra)


def act(action: str, registry: ModelRegistry, search: Search | None, name: str | None, text: str,
        beam_size: float | str | None, alpha: float, penalty: str, max_extra: float) -> Search | None:
    """Step / Back / Run to end / Reset on the session's search; returns the new search."""
    if action == "reset":
        return start(registry, name, text, beam_size, alpha, penalty, max_extra)
    if action != "back":  # Back walks the search on screen, even once the settings changed
        search = _current(search, registry, name, text, beam_size, alpha, penalty, max_extra)
    if search is None:
        return None
    with search.lock:
        if action != "back":
            _say_beam_size(search, beam_size)
        _move(action, search)
    return search


def _say_beam_size(search: Search, beam_size: float | str | None) -> None:
    """The beam size notice says what the box holds now: a search kept for a size typed again to the same
    effect (−1 after 0: both mean 1) still said "0 is below the minimum"."""
    notice = clamp_beam(beam_size)[1]
    search.notices = [n for n in search.notices if not n.startswith("beam size")] + ([notice] if notice else [])


def _room_for_a_step(search: Search) -> bool:
    """Whether one more step keeps the search within the request budget's memory (every step is kept for Back);
    if not, says so."""
    budget = slots.current_budget()
    config, steps = search.stepper.model.config, len(search.views)
    held = beam_search_megabytes(config, search.stepper.options.beam_size, len(search.stepper.source.ids), steps)
    if held <= budget.memory_mb:
        return True
    info(f"Stopped at step {steps - 1}: the search holds ~{held:,.0f} MB (every step is kept for Back), and "
         f"{budget_words(budget)}. A shorter sentence or a smaller beam goes further.")
    return False


def _move(action: str, search: Search) -> None:
    if action == "step":
        if search.view.done:
            info("The search is finished: press Back or Reset.")
        elif _room_for_a_step(search):
            search.views.append(search.stepper.step())
    elif action == "back":
        if len(search.views) > 1:
            search.stepper.back()
            search.views.pop()
        else:
            info("Already at the start.")
    elif action == "run":
        with slots.heavy() as work:  # the slot this request holds: stop between steps once it must
            while not search.view.done and _room_for_a_step(search):
                work.check()
                search.views.append(search.stepper.step())


def act_and_render(action: str, registry: ModelRegistry, search: Search | None, choice: str | None, *settings) -> tuple:
    """act() and the page it leaves, in one call: a step rendered in a callback of its own could be
    drawn before a second keypress stepped the same search on, so the page showed a step behind. Drawn
    under the search's lock: each press is queued (a clicker's rapid presses all count), and whichever
    drawing comes last shows the search as the last press left it."""
    try:
        search = act(action, registry, search, *settings)
    except Refused as why:
        return None, *render(registry, None, refusal=str(why))
    with search.lock if search else contextlib.nullcontext():
        return search, *render(registry, search, choice, *settings)


def steps_to(registry: ModelRegistry, steps: int, choice: str | None, *settings) -> tuple:
    """A new search taken `steps` steps on (or to its end, if sooner), and its page: a deep link's view."""
    search = None
    try:
        with slots.heavy() as work:  # a link's step=200 stops, like Run to end, once its slot must
            for _ in range(max(1, steps)):
                work.check()
                taken = len(search.views) if search else 0
                search = act("step", registry, search, *settings)
                if search is None or search.view.done or len(search.views) == taken:  # done, or no room left
                    break
    except Refused as why:
        return None, *render(registry, None, refusal=str(why))
    with search.lock if search else contextlib.nullcontext():
        return search, *render(registry, search, choice, *settings)


@dataclass
class BeamTab:
    """What a deep link sets and runs: the sentence box, the session's search, the settings and what is shown."""
    source: gr.Textbox
    beam_size: gr.Number
    alpha: gr.Slider
    search: gr.State
    choice: gr.Dropdown
    settings: list
    shown: list


# ----- what is shown ---------------------------------------------------------------------------
def hypotheses_table(view: StepView) -> str:
    return md_table(TABLE_HEADERS, table(view), numeric=(1, 2), caption=TABLE_CAPTION)


def attention_figure(search: Search | None, choice: str | None) -> go.Figure:
    """The cross-attention behind the picked hypothesis's last token (the first hypothesis when none is)."""
    if search is None:
        return plots.empty("Press Step to start the search.")
    hyps = dict(hypotheses(search.view))
    hyp = hyps.get(choice) or next(iter(hyps.values()), None)
    if hyp is None or hyp.cross_attention is None:
        return plots.empty("No token chosen yet: press Step.")
    layers = [a.float().cpu().numpy() for a in hyp.cross_attention]
    before = hyp.tokens[:-1][-6:]
    prefix = ("… " if len(hyp.tokens) > 7 else "") + " ".join(before) if before else "<bos>"
    return plots.cross_attention_rows(layers, search.stepper.source_tokens,
                                      f"Cross-attention while choosing “{plots.label(hyp.tokens[-1])}” "
                                      f"after “{plots.label(prefix)}”")


def comparison(registry: ModelRegistry, search: Search | None) -> tuple[str, str, str]:
    """(stepper's result, Translate's result for the same settings, verdict) once the search is done."""
    if search is None or not search.view.done:
        return "", "", ("*Run the search to the end to compare it with one-shot beam search (the Translate tab's "
                        "decoder).*")
    if search.compared is None:
        search.compared = _compare(registry, search)
    return search.compared


def _compare(registry: ModelRegistry, search: Search) -> tuple[str, str, str]:
    name, text, size, alpha, penalty, max_extra = search.key
    best = search.view.finished[0] if search.view.finished else None
    mine = search.stepper.tokenizer.decode([i for i in best.ids if i != EOS_ID]) if best else ""
    # The Translate tab's decoder on the weights the search used: a model training live has newer ones
    # under the same name by now, which would make any comparison "different".
    searched = search.bundle
    t = translate_detailed(searched, [text], decode_options(size, alpha, penalty, max_extra))[0]
    same = mine == t.text and best is not None and abs(best.score - t.score) < 1e-4
    # "The Translate tab's decoder", not its result: the translation on that tab may be another
    # sentence's, or older weights' while the model trains.
    verdict = ("**Same result** as one-shot beam search (the Translate tab's decoder) with these weights and "
               "settings" if same else "**Different** from one-shot beam search (the Translate tab's decoder)")
    if name in registry.names() and registry.get(name).info.get("step") != searched.info.get("step"):
        verdict += (f" (both decoded with the weights searched, step {searched.info.get('step', '?')}; the "
                    f"model has trained on since)")
    return (f"{mine}  (score {best.score:.4f})" if best else "(no finished hypothesis)",
            f"{t.text}  (score {t.score:.4f})", verdict + ".")


def render(registry: ModelRegistry, search: Search | None, choice: str | None = None, *settings,
           refusal: str = "") -> tuple:
    """Everything the tab shows for a search: tree, table, hypothesis picker, attention,
    explanation, comparison, the buttons' state (Step, Back, Run to end), the beam size box
    (the size used) and the input notices. settings (the tab's inputs, as for act): where they
    are not the search's own, the page says so, as settings_changed() does. refusal: why there is
    no search, said where the notices go."""
    if search is None:
        blank = plots.empty("Type a sentence and press Step.")
        return (blank, "", gr.Dropdown(choices=[], value=None), blank, "", "", "",
                "*Nothing searched yet.*", gr.Button(interactive=True), gr.Button(interactive=False),
                gr.Button(interactive=True), gr.skip(), f"**{md(refusal)}**" if refusal else "")
    view = search.view
    names = [n for n, _ in hypotheses(view)]
    choice = choice if choice in names else (names[0] if names else None)
    stale = bool(settings) and not _started_with(search, registry, *settings)  # Back after a change
    mine, theirs, verdict = ("", "", "") if stale else comparison(registry, search)
    best = tuple(view.finished[0].ids) if view.done and view.finished else None
    going = gr.Button(interactive=stale or not view.done)  # Step and Run; stale: they start a new search
    return (plots.beam_tree(tree_nodes(search.views), view.step, best), hypotheses_table(view),
            gr.Dropdown(choices=names, value=choice), attention_figure(search, choice),
            md(view.explanation) + ("  \n" + changed_note(registry, search, settings[0]) if stale else ""), mine,
            theirs, verdict,
            going, gr.Button(interactive=len(search.views) > 1), going,
            gr.skip() if stale else gr.Number(value=search.key[2]),  # stale: the box keeps the size typed
            "\n".join(f"- {md(n)}" for n in search.notices))


def example_choices(registry: ModelRegistry, name: str | None) -> gr.Dropdown:
    """The picked model's example sentences (hidden when it has none)."""
    samples = picked_examples(registry, name)
    return gr.Dropdown(choices=samples, value=None, visible=bool(samples))


def settings_changed(registry: ModelRegistry, search: Search | None, *settings) -> tuple:
    """Step and Run come back (a finished search had disabled them); what is on screen is said to
    be the previous search's, and its comparison with the Translate tab is dropped. Settings back
    to the search's own (another model picked, then this one again) bring its state back.
    Returns updates for Step, Run, the explanation, the verdict and the two compared results."""
    if _started_with(search, registry, *settings):
        going = gr.Button(interactive=not search.view.done)
        mine, theirs, verdict = comparison(registry, search)
        return going, going, md(search.view.explanation), verdict, mine, theirs
    buttons = (gr.Button(interactive=True), gr.Button(interactive=True))
    if search is None:
        return *buttons, gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return *buttons, changed_note(registry, search, settings[0]), "", "", ""


def changed_note(registry: ModelRegistry, search: Search, name: str | None) -> str:
    """What is on screen is the previous search's; with another model picked, the note names the one it
    was made with (the tree and table otherwise passed for the picked model's)."""
    if search.model_key is None or search.model_key == registry.key(name):
        return SETTINGS_CHANGED
    return (f"*Another model picked: Step or Run to end starts a new search with it (shown: the previous "
            f"search, made with **{md(search.model_key[0])}**, which Back still walks).*")


def carry_over(current: Current | None, text: str | None) -> str:
    """An empty sentence box takes the Translate tab's last sentence, so a lecturer going from tab
    to tab need not type it again; one the user typed is left alone."""
    if current is None or not current.source or (text or "").strip():
        return gr.skip()
    return current.source


def build(shell: Shell, translated: gr.State, tab: gr.Tab) -> BeamTab:
    search = gr.State(None)
    with gr.Row():
        with gr.Column(scale=3):
            source = gr.Textbox(label="Sentence to search", lines=1, max_lines=4, elem_id="beam-source",
                                placeholder="Type a sentence; Enter takes the first step")
            # A one-line dropdown, not a list of examples: on a projector (presenter mode) a list
            # pushed the Step button and everything it draws below the bottom of the screen.
            example = gr.Dropdown(choices=[], value=None, label="Or pick an example")
        with gr.Column(scale=3):  # two settings a row: Step and the tree stay higher up the screen
            with gr.Row():
                # No precision: 2.5 reaches clamp_beam, which says what it used instead (Gradio rounded silently).
                beam_size = gr.Number(value=DEFAULT_BEAM, label=f"beam size ({BEAM_RANGE[0]}–{BEAM_RANGE[1]})")
                alpha = Slider(0.0, 2.0, value=0.6, step=0.05, label="length penalty α")
            with gr.Row():
                penalty = gr.Radio(["gnmt", "plain"], value="gnmt", label="penalty: ((5+|Y|)/6)^α or |Y|^α")
                max_extra = Slider(0, 200, value=50, step=1, label="max length: source + N")
    with gr.Row(elem_id="beam-controls"):
        step = gr.Button("Step (→)", variant="primary", elem_id="beam-step")
        back = gr.Button("Back (←)", interactive=False, elem_id="beam-back")
        run = gr.Button("Run to end")
        reset = gr.Button("Reset")
    notices = gr.Markdown()  # input notices (truncated, unknown characters, beam size) stay on the page
    explanation = gr.Markdown("*Nothing searched yet.*", elem_classes="announce")  # read out at each step
    tree = gr.Plot(label="Search tree", elem_id="beam-tree")
    hyp_table = gr.Markdown(elem_id="beam-hypotheses")
    choice = gr.Dropdown(label="Hypothesis whose attention is shown", choices=[])
    attention = gr.Plot(label="Cross-attention of that hypothesis at this step")
    with gr.Row():
        mine = gr.Textbox(label="Beam search here: best hypothesis", interactive=False, elem_classes="readout")
        theirs = gr.Textbox(label="One-shot beam search (the Translate tab's decoder), same weights and settings",
                            interactive=False, elem_classes="readout")
    verdict = gr.Markdown()

    settings = [shell.model, source, beam_size, alpha, penalty, max_extra]
    shown = [tree, hyp_table, choice, attention, explanation, mine, theirs, verdict, step, back, run, beam_size,
             notices]
    for button, action in ((step, "step"), (back, "back"), (run, "run"), (reset, "reset")):
        triggers = [button.click, source.submit] if action == "step" else [button.click]
        # Step and Back: every press counts ("once", Gradio's default, dropped presses made while a step
        # was on its way: five quick presses of a clicker went 2 steps on).
        mode = "multiple" if action in ("step", "back") else "once"
        gr.on(triggers, guard(slots.in_a_slot(partial(act_and_render, action, shell.registry))),
              inputs=[search, choice, *settings],
              outputs=[search, *shown], trigger_mode=mode, api_name=f"beam_{action}", **HEAVY).then(
            None, js=SHOW_TREE_OR_SOURCE_JS if action in ("step", "run") else SHOW_TREE_JS)
    choice.input(guard(attention_figure), inputs=[search, choice], outputs=attention)
    # New settings start a new search on the next Step (see _current): offer Step and Run again
    # even when the last search had finished. The beam size box: typed in only (.input), since
    # render() sets it to the size used.
    gr.on([source.change, beam_size.input, alpha.change, penalty.change, max_extra.change, shell.model_key.change],
          guard(partial(settings_changed, shell.registry)), inputs=[search, *settings],
          outputs=[step, run, explanation, verdict, mine, theirs],
          show_progress="hidden")
    example.input(lambda text: text or gr.skip(), inputs=example, outputs=source)
    tab.select(carry_over, inputs=[translated, source], outputs=source, show_progress="hidden")
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(example_choices, shell.registry)),
          inputs=shell.model, outputs=example)
    return BeamTab(source, beam_size, alpha, search, choice, settings, shown)
