"""Word choice: how the model picks each word. Layer by layer (the logit lens: what each decoder layer would say,
where "dogs" is decided); trained one way, translating another (a reference scored after its own words and after
the model's, where the two part); why this word and not that one (a contrastive gradient × input beside the
cross-attention); and how sure against how right, section 5.4's label smoothing claim (a reliability diagram of
one or two models, with perplexity and BLEU). The tab opens on "Zwei Hunde spielen im Schnee." and its reference
"Two dogs are playing in the snow.", asking why "dogs" and not "cat".
"""
from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from .. import plots
from ..components import Slider
from ..links.address import LINK_PENDING, View, forget_drawn
from ..numbers import comparison
from ..numbers import word_choice as numbers
from ..numbers.explanations import Refused
from ..plots import word_choice as figures
from ..server.guard import guard
from ..server.limits import HEAVY
from ..server.registry import UNAVAILABLE, ModelRegistry, examples_for
from ..shell import Shell
from ..text import clip, md, md_table, refusal
from .compare import corpus_default, defaults, notice_lines

TAB_ID = "word-choice"
SLUG = "word-choice"
INTRO = ("**How does the model choose each word?** Where in the decoder a word is decided, what it would have said "
         "had it been trained on its own words, why one word and not another, and how sure it is against how often "
         "it is right. Type a sentence and a reference translation (the second is optional).")
LENS_HOW = ("**Layer by layer** (the *logit lens*): each decoder layer's output put through the model's final "
            "projection (section 3.4), as if it were the last layer. A cell names the token that layer would write "
            "there (bold: the one finally written); its colour is the probability it gives the word finally "
            "written. The last row is the model's own output.")
EXPOSURE_HOW = ("**Trained one way, translating another.** In training (and scoring) the decoder reads the "
                "reference's words before each position: *teacher forcing*. Translating, it reads its own. Once its "
                "words leave the reference's, every later word is predicted from a beginning no reference gave it "
                "(*exposure bias*): blue, each reference token after the reference's words; vermilion, after the "
                "model's own.")
CONTRAST_HOW = ("**Why this word and not that one?** The difference between two candidates' probabilities at one "
                "position, traced back to the source tokens (inseq's *contrast_prob_diff*): purple raised the first "
                "over the second, orange lowered it. *Gradient × input* takes one slope; where the model is sure "
                "(p near 1) the slope is small and its sign unreliable (try it: “Hunde” then seems to speak against "
                "“dogs”). *Integrated gradients* add the slopes up from all-zero embeddings, and together they make "
                "up the whole difference.")
CALIBRATION_HOW = ("**How sure, how right (section 5.4).** Label smoothing “hurts perplexity, as the model learns to "
                   "be more unsure, but improves accuracy and BLEU score.” Teacher forced on N reference sentences, "
                   "each token's confidence (its top token's probability) is binned; a bar is how often that top "
                   "token was the reference's. On the dashed diagonal a model is calibrated; the expected "
                   "calibration error (ECE) is the gap, averaged by tokens.")
TABLE3_PAIR = ("*Two models that differ only in ε_ls, our Table 3's base (0.1) and its no-smoothing run (`D-nols`, "
               "0), retrained on 2026-12-02 (the same perplexities as the table's): on Multi30k's 1,014 dev sentences "
               "smoothing gave the higher perplexity (15.71 against 15.02) and an under-confident model (ECE 0.054 "
               "against 0.025: right more often than it says it will be), the same top-1 "
               "accuracy (0.528) and no better BLEU (greedy 23.8 against 25.2; beam 27.1 against 27.3, within the "
               "3.6 two seeds differ by): the picture is `docs/calibration.png`. They are not shipped (15 MB "
               "each): `python bench/table3.py --only base,D-nols` trains them (about 35 minutes each on one core), "
               "then open `runs/table3/base/final` and `runs/table3/D-nols/final` under *Open another checkpoint*; "
               "or train one model twice on the Train tab, label smoothing 0.1 and 0.*")
OBJECTIVES = {"probability difference": "probability", "logit difference": "logit"}
METHODS = {"integrated gradients": "integrated_gradients", "gradient × input": "grad_x_input"}


# ----- the sentence ---------------------------------------------------------------------------------
def first_pair(registry: ModelRegistry, name: str | None) -> tuple[str, str, str]:
    """(source, reference, foil) the tab opens with: "Zwei Hunde spielen im Schnee." for a model that reads German,
    else the model's first example, no reference, the runner-up as the foil."""
    try:
        bundle = registry.get(name)
    except UNAVAILABLE:
        return "", "", ""
    if bundle.info.get("src_lang") == "de":
        return numbers.FIRST_SOURCE, numbers.FIRST_REFERENCE, numbers.FIRST_FOIL
    examples = examples_for(bundle)
    return (examples[0] if examples else ""), "", ""


def position_choices(tokens: list[str], position: int) -> gr.Dropdown:
    return gr.Dropdown(choices=[(f"{i + 1}: {plots.shown(t)}", i) for i, t in enumerate(tokens)], value=position)


def decided_line(lens: Any) -> str:
    """Where each word is decided, in words: the layer from which it stays the top token."""
    layers = len(lens.top_tokens)
    parts = []
    for token, layer in zip(lens.tokens, lens.decided_at):
        if layer is not None and token != "<eos>":
            parts.append(f"{md(plots.shown(token))}: layer {layer + 1}" if layer else
                         f"{md(plots.shown(token))}: already layer 1")
    return (f"**Where each word is decided** (the layer from which it is the top token in every layer above, of "
            f"{layers}): " + "; ".join(parts) + ".") if parts else ""


def exposure_line(f: Any) -> str:
    if f.diverges_at is None:
        return ("**The model's own words are the reference's:** no divergence, and the two scores are one (a "
                "translation scored after its own words is what the decoder said).")
    t = f.diverges_at
    wrote = "stopped" if f.said_there is None else f"wrote {md(plots.shown(f.said_there))}"
    expected = md(plots.shown(f.reference[t])) if t < len(f.reference) else "stopped"
    forced, free = f.log_probabilities
    return (f"**They part at token {t + 1}:** the reference says {expected}; the model {wrote} (p of the reference's "
            f"token there: {f.forced[t]:.2f}). After that the reference's words follow a beginning the model did not "
            f"write: log P of the reference {forced:.1f} after its own words, {free:.1f} after the model's.")


def contrast_line(c: Any) -> str:
    top = int(abs(c.normalized).argmax())
    way = "raised" if c.normalized[top] >= 0 else "lowered"
    return (f"At token {c.position + 1}: p({md(plots.shown(c.token))}) = {c.probability:.3f}, "
            f"p({md(plots.shown(c.foil))}) = {c.foil_probability:.5f}, a difference of {c.difference:+.3f}. The "
            f"source token that moves it most: {md(plots.shown(c.source_tokens[top]))} ({way} it, "
            f"{abs(c.normalized[top]):.0%} of the attribution); the cross-attention looks most at "
            f"{md(plots.shown(c.source_tokens[int(c.cross_attention.argmax())]))}.")


def look(registry: ModelRegistry, name: str | None, source: str, reference: str, position: Any, foil: str,
         objective_label: str, method_label: str) -> tuple:
    """The three sentence views: (lens plot, decided line, exposure plot, exposure line, position picker, foil,
    contrast plot, contrast line, notices, the View on screen)."""
    skip = (gr.skip(),) * 8
    try:
        bundle = numbers.model(registry, name)
        lens = numbers.lens(bundle, source)
    except Refused as why:
        return (*skip, f"**Cannot look:** {md(clip(why, 300))}", gr.skip())
    label = plots.label(str(name))
    at = position if isinstance(position, int) and 0 <= position < len(lens.tokens) else min(1, len(lens.tokens) - 1)
    foil = foil if str(foil or "").strip() else plots.shown(numbers.runner_up(lens, at))
    notices = list(lens.notices)
    lens_plot = figures.logit_lens_map(lens, f"{label} · what each decoder layer would write")
    if str(reference or "").strip():
        try:
            f = numbers.exposure(bundle, source, reference)
            exposure = (figures.free_running_bars(f, f"{label} · the reference after its own words and after the "
                                                     f"model's"), exposure_line(f))
        except Refused as why:
            exposure = (plots.empty("No reference to score."), f"**Cannot score the reference:** {md(clip(why, 300))}")
    else:
        exposure = (plots.empty("Type a reference translation to score it both ways."), "")
    try:
        c = numbers.why_not(bundle, source, at, foil, OBJECTIVES.get(objective_label, objective_label), "",
                            METHODS.get(method_label, method_label))
        contrast = (figures.contrast_bars(c, f"{label} · why {plots.label(c.token)} and not {plots.label(c.foil)}?"),
                    contrast_line(c))
        notices += c.notices
    except Refused as why:
        contrast = (gr.skip(), f"**Cannot contrast:** {md(clip(why, 300))}")
    shown = View(tab=SLUG, model=name, source=source, target=reference or None, query=at + 1, foil=str(foil))
    return (lens_plot, decided_line(lens), *exposure, position_choices(lens.tokens, at), foil, *contrast,
            notice_lines(notices), shown)


def contrast_again(registry: ModelRegistry, name: str | None, source: str, position: Any, foil: str,
                   objective_label: str, method_label: str, shown: View | None) -> tuple:
    """Another position, foil or objective: the contrast alone (a new position takes its runner-up as the foil when
    the foil box is blank)."""
    try:
        bundle = numbers.model(registry, name)
        c = numbers.why_not(bundle, source, position if position is not None else 0, foil or "<eos>",
                            OBJECTIVES.get(objective_label, objective_label), "",
                            METHODS.get(method_label, method_label))
    except Refused as why:
        return gr.skip(), f"**Cannot contrast:** {md(clip(why, 300))}", gr.skip()
    label = plots.label(str(name))
    view = View(tab=SLUG, model=name, source=source, target=shown.target if shown else None, query=c.position + 1,
                foil=str(foil))
    return (figures.contrast_bars(c, f"{label} · why {plots.label(c.token)} and not {plots.label(c.foil)}?"),
            contrast_line(c), view)


def runner_up_foil(registry: ModelRegistry, name: str | None, source: str, position: Any) -> str:
    """The last layer's second choice at a newly picked position: the foil worth asking about."""
    try:
        lens = numbers.lens(numbers.model(registry, name), source)
    except Refused:
        return gr.skip()
    return plots.shown(numbers.runner_up(lens, position)) if isinstance(position, int) and position < len(
        lens.tokens) else gr.skip()


# ----- calibration ------------------------------------------------------------------------------------
def calibrate(registry: ModelRegistry, name_a: str | None, name_b: str | None, corpus: str, split: str, n: float,
              progress: gr.Progress = gr.Progress()) -> tuple:  # noqa: B008 (Gradio's way to ask for one)
    """(reliability diagram, the table of ECE, perplexity and BLEU, notes)."""
    names = [x for x in dict.fromkeys((name_a, name_b)) if x]
    done = [0]

    def step(k: int) -> None:
        done[0] += k
        progress((done[0], 2 * len(names) * int(n)), desc="scoring and translating", unit="sentences")

    try:
        compared, described, notices = numbers.calibration_view(registry, names, corpus, split, n, step)
    except Refused as why:
        return gr.skip(), gr.skip(), f"**Cannot measure:** {md(clip(why, 300))}"
    figure = figures.reliability_diagram([(c.name, c.calibration) for c in compared],
                                         f"Reliability on {plots.label(described)}")
    rows = [[c.name, "not recorded" if c.label_smoothing is None else f"{c.label_smoothing:g}",
             f"{c.calibration.ece:.3f}", f"{c.calibration.mean_confidence:.3f}", f"{c.calibration.top1:.3f}",
             f"{c.calibration.perplexity:.2f}", f"{c.bleu.bleu:.2f}"] for c in compared]
    table = md_table(["model", "ε_ls", "ECE (lower: calibrated)", "mean confidence", "top-1 accuracy",
                      "perplexity", "BLEU (greedy)"], rows, numeric=(2, 3, 4, 5, 6))
    notes = [f"On {described}: teacher forced for the calibration and perplexity, greedy for BLEU (sacreBLEU).",
             *notices]
    if len(compared) == 2 and compared[0].label_smoothing is not None and compared[1].label_smoothing is not None:
        smooth, plain = sorted(compared, key=lambda c: -c.label_smoothing)
        if smooth.label_smoothing > plain.label_smoothing:
            notes.append(smoothing_verdict(smooth, plain))
    return figure, table, notice_lines(notes)


def smoothing_verdict(smooth: Any, plain: Any) -> str:
    """Section 5.4's claim against two models' figures: the smoothed one's perplexity higher, its BLEU higher?"""
    ppl = (smooth.calibration.perplexity, plain.calibration.perplexity)
    bleu = (smooth.bleu.bleu, plain.bleu.bleu)
    return (f"Section 5.4's claim here: with smoothing (ε_ls {smooth.label_smoothing:g} against "
            f"{plain.label_smoothing:g}) perplexity is {'higher' if ppl[0] > ppl[1] else 'not higher'} ({ppl[0]:.2f} "
            f"against {ppl[1]:.2f}) and BLEU {'higher' if bleu[0] > bleu[1] else 'not higher'} ({bleu[0]:.2f} "
            f"against {bleu[1]:.2f}).")


# ----- the endpoints --------------------------------------------------------------------------------------
def register(registry: ModelRegistry) -> None:
    """/logit_lens, /free_running, /contrast and /calibration (closures: Gradio reads an endpoint's parameters from
    its hints)."""
    def answer(call):
        try:
            return call()
        except Refused as why:
            raise refusal(why) from None

    def logit_lens(model: str, source: str, top_k: int = numbers.TOP_K) -> dict:
        """Each decoder layer's top tokens at each position of the model's greedy translation, and the rank and
        probability of the token written there; the layer where each is decided."""
        return answer(lambda: numbers.lens_json(numbers.lens(numbers.model(registry, model), source, top_k)))

    def free_running(model: str, source: str, reference: str) -> dict:
        """The reference's tokens after its own prefix (teacher forcing) and after the model's greedy one, where
        the two part and what the model said there."""
        return answer(lambda: numbers.exposure_json(numbers.exposure(numbers.model(registry, model), source,
                                                                     reference)))

    def contrast(model: str, source: str, position: int, foil: str, objective: str = "probability",
                 target: str = "", method: str = "integrated_gradients", steps: int = numbers.CONTRAST_STEPS) -> dict:
        """Why the target's token at position (from 0; target blank: the model's greedy translation) and not foil:
        both probabilities and the attribution of their difference (integrated gradients or gradient × input) to
        each source token, beside the cross-attention."""
        return answer(lambda: numbers.contrast_json(numbers.why_not(numbers.model(registry, model), source, position,
                                                                    foil, objective, target, method, steps)))

    def calibration(model_a: str, model_b: str = "", corpus: str = "", split: str = "valid",
                    sentences: int = 100) -> dict:
        """Reliability bins, ECE, perplexity and greedy BLEU of one model, or two of one language pair, on the first
        sentences of a corpus split (as many as the request's budget affords)."""
        def measured() -> dict:
            label = corpus or comparison.corpus_for(numbers.model(registry, model_a))
            compared, described, notices = numbers.calibration_view(registry, [model_a, model_b], label, split,
                                                                     sentences)
            return {**numbers.calibration_json(compared, described), "notices": notices}
        return answer(measured)

    for endpoint in (logit_lens, free_running, contrast, calibration):
        gr.api(guard(endpoint), api_name=endpoint.__name__, **HEAVY)


# ----- a link -------------------------------------------------------------------------------------------
def linked(view: View | None) -> tuple:
    """A page opened on a Word choice link: its sentence, reference, position and foil set, to be drawn afresh."""
    if view is None or view.tab != SLUG:
        return (gr.skip(),) * 5
    position = None if view.query is None else view.query - 1
    return (view.source if view.source is not None else gr.skip(), view.target or "",
            gr.skip() if position is None else gr.Dropdown(choices=[(str(position + 1), position)], value=position),
            view.foil or "", None)


# ----- the tab ----------------------------------------------------------------------------------------------
def build(shell: Shell, tab: gr.Tab, on_screen: gr.State) -> tuple[gr.State, gr.State, list[dict]]:
    """Returns the View on screen (for "Link to this view"), what it was drawn for, and the steps that set the tab
    from a link and draw it."""
    registry = shell.registry
    source_text, reference_text, foil_text = first_pair(registry, shell.model.value)
    drawn, shown = gr.State(None), gr.State(None)
    gr.Markdown(INTRO)
    with gr.Row(equal_height=True):
        source = gr.Textbox(label="Source sentence", value=source_text, scale=3, min_width=280, max_lines=3,
                            elem_id="word-source")
        reference = gr.Textbox(label="Reference translation (optional)", value=reference_text, scale=3, min_width=280,
                               max_lines=3, elem_id="word-reference")
        run = gr.Button("Look", variant="primary", scale=0, min_width=110, elem_id="word-run")
    notices = gr.Markdown(elem_classes="announce")
    gr.Markdown(LENS_HOW)
    lens_plot = gr.Plot(label="Layer by layer: what each decoder layer would write")
    decided = gr.Markdown(elem_id="word-decided")
    gr.Markdown(EXPOSURE_HOW)
    exposure_plot = gr.Plot(label="Teacher forcing and free running")
    exposure = gr.Markdown(elem_id="word-exposure")
    gr.Markdown(CONTRAST_HOW)
    with gr.Row(equal_height=True):
        position = gr.Dropdown(choices=[], value=None, label="At the translation's token", scale=2,
                               elem_id="word-position")
        foil = gr.Textbox(label="and not (a word or token)", value=foil_text, scale=2, max_lines=1, elem_id="word-foil")
        method = gr.Radio(list(METHODS), value=next(iter(METHODS)), label="Attribute by", scale=2)
        objective = gr.Radio(list(OBJECTIVES), value=next(iter(OBJECTIVES)), label="the", scale=2)
    contrast_plot = gr.Plot(label="Why this word and not that one")
    contrasted = gr.Markdown(elem_id="word-contrast")
    _calibration_panel(shell)

    inputs = [shell.model, source, reference, position, foil, objective, method]
    outputs = [lens_plot, decided, exposure_plot, exposure, position, foil, contrast_plot, contrasted, notices, shown]
    event = dict(fn=guard(partial(look, registry)), inputs=inputs, outputs=outputs, api_visibility="private", **HEAVY)
    first_draw = dict(fn=guard(partial(draw_if_new, registry)), inputs=[on_screen, drawn, shell.model_key, *inputs],
                      outputs=[*outputs, drawn], api_visibility="private", **HEAVY)
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden", api_visibility="private").then(**first_draw)
    gr.on([run.click, source.submit, reference.submit], trigger_mode="always_last", **event)
    again = dict(fn=guard(partial(contrast_again, registry)),
                 inputs=[shell.model, source, position, foil, objective, method, shown],
                 outputs=[contrast_plot, contrasted, shown], api_visibility="private", **HEAVY)
    position.input(guard(partial(runner_up_foil, registry)), inputs=[shell.model, source, position], outputs=foil,
                   show_progress="hidden", api_visibility="private").then(**again)
    gr.on([foil.submit, objective.input, method.input], trigger_mode="always_last", **again)
    # Another model: a fresh draw once on screen. The sentences stay (a link may have just set them).
    shell.model_key.change(forget_drawn, inputs=drawn, outputs=drawn, show_progress="hidden",
                           api_visibility="private").then(**first_draw)
    register(registry)
    return shown, drawn, [dict(fn=linked, outputs=[source, reference, position, foil, drawn], show_progress="hidden",
                        api_visibility="private"), first_draw]


def draw_if_new(registry: ModelRegistry, screen: str, drawn: Any, key: Any, *inputs: Any) -> tuple:
    """look's views and the key they were drawn for, when the tab is on screen and not drawn for this model."""
    if screen != TAB_ID or drawn in (key, LINK_PENDING):
        return (gr.skip(),) * 11
    return (*look(registry, *inputs), key)


def _calibration_panel(shell: Shell) -> None:
    """One model's reliability, or two models' (model A the picked one), on the first N sentences of a corpus."""
    registry = shell.registry
    first_a, first_b = defaults(registry, shell.model.value)
    gr.Markdown(CALIBRATION_HOW)
    with gr.Row(equal_height=True):
        model_a = gr.Dropdown(registry.choices(), value=first_a, label="Model A (blue)", elem_id="word-model-a")
        model_b = gr.Dropdown(registry.choices(), value=None if first_b == first_a else first_b,
                              label="Model B (orange, optional: the same language pair)", elem_id="word-model-b")
    with gr.Row(equal_height=True):
        corpus = gr.Dropdown(list(comparison.CORPORA), value=corpus_default(registry, first_a), label="Corpus",
                             scale=2)
        split = gr.Radio(list(comparison.SPLITS), value="valid", label="Split", scale=2)
        n = Slider(1, comparison.MAX_SENTENCES, value=comparison.DEFAULT_SENTENCES, step=1, label="first N sentences",
                   scale=2)
        measure = gr.Button("Measure", scale=0, min_width=120, elem_id="word-measure")
    figure = gr.Plot(label="Reliability diagram")
    table = gr.Markdown(elem_id="word-calibration")
    notes = gr.Markdown(TABLE3_PAIR)
    measure.click(guard(partial(calibrate, registry)), inputs=[model_a, model_b, corpus, split, n],
                  outputs=[figure, table, notes], api_visibility="private", **HEAVY)
    shell.model_key.change(lambda name: (gr.Dropdown(choices=registry.choices(), value=name),
                                         gr.Dropdown(choices=registry.choices()), corpus_default(registry, name)),
                           inputs=shell.model, outputs=[model_a, model_b, corpus], show_progress="hidden",
                           api_visibility="private")
