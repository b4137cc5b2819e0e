"""Knock out: why is each part there? Switch one of the paper's parts off (positions, the 1/√d_k scale, a residual
connection, a LayerNorm, a whole layer, heads, the look-ahead mask, a source token hidden from cross-attention) and
see what breaks: one or two sentences before and after, each token's probability before and after, the attention
that reads the part; the first sentences of a corpus before and after. Each part says, with its section, what the
paper claims it is for; the numbers under it test the claim. The knock-out runs on a private copy of the model.
The tab opens with positions knocked out of "Zwei Hunde jagen eine Katze." and "Eine Katze jagt zwei Hunde."
"""
from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

import gradio as gr
import numpy as np

from core.explain.knockout import CLAIMS

from .. import plots
from ..components import Slider
from ..links.address import LINK_PENDING, View, forget_drawn
from ..numbers import comparison
from ..numbers import knockout as numbers
from ..numbers.explanations import Refused
from ..numbers.knockout import PART_NAMES, KnockoutView
from ..plots import knockout as figures
from ..server.guard import guard
from ..server.limits import HEAVY
from ..server.registry import UNAVAILABLE, ModelRegistry, examples_for
from ..shell import Shell
from ..text import clip, md, refusal
from .attention import bold_changes
from .compare import corpus_default, notice_lines

TAB_ID = "knockout"
SLUG = "knock-out"
INTRO = ("**Why is each part there?** Knock one of the paper's parts out of the model and see what breaks. Each "
         "part says what the paper claims it is for; the numbers under it test that claim on the model in front of "
         "you. The knock-out runs on a private copy of the model: no one else's translation sees it.")
PART_LABELS = {f"{PART_NAMES[part][0].upper()}{PART_NAMES[part][1:]} ({CLAIMS[part].section})": part
               for part in CLAIMS}
FIRST_PART = "positions"


# ----- what the tab shows ------------------------------------------------------------------------
def claim_line(part: str | None) -> str:
    """The part's claim, with its section, in one line."""
    claim = CLAIMS.get(part or FIRST_PART)
    return f"**Section {claim.section}:** {md(claim.claim[0].upper() + claim.claim[1:])}." if claim else ""


def first_sentences(registry: ModelRegistry, name: str | None) -> tuple[str, str]:
    """The sentences the tab opens with: who chases whom for a model that reads German, else the model's first two
    examples (the second blank when it has one)."""
    try:
        bundle = registry.get(name)
    except UNAVAILABLE:
        return "", ""
    if bundle.info.get("src_lang") == "de":
        return numbers.FIRST_PAIR
    examples = examples_for(bundle)
    return (examples[0] if examples else ""), (examples[1] if len(examples) > 1 else "")


def where_options(registry: ModelRegistry, name: str | None, part: str | None, first: str) -> dict[str, Any]:
    """The places the part can be knocked out of the picked model, as the Where box's settings (hidden for a part
    that sits nowhere in particular)."""
    part = part or FIRST_PART
    try:
        bundle = registry.get(name)
    except UNAVAILABLE:
        return dict(choices=[], value=None, visible=False)
    tokens = bundle.tokenizer.tokens(bundle.tokenizer.encode(first or "")) + ["<eos>"]
    config = bundle.model.config
    choices = numbers.where_choices(part, config, [plots.shown(t) for t in tokens])
    return dict(choices=choices, value=numbers.default_where(part, config, tokens), visible=bool(choices),
                label="Which source token (of sentence A)" if part == "hide_source_token" else "Where")


def where_update(registry: ModelRegistry, name: str | None, part_label: str, first: str,
                 where: str | None = None) -> gr.Dropdown:
    """The Where box for this model, part and sentence, keeping the place picked where it is still one."""
    options = where_options(registry, name, PART_LABELS.get(part_label, part_label), first)
    if where is not None and where in [value for _, value in options["choices"]]:
        options["value"] = where
    return gr.Dropdown(**options)


def translations(view: KnockoutView) -> str:
    """Each sentence intact and knocked out, the words that changed in bold."""
    rows = [f"| **{name}** | {md(e.before.text) or '*(empty)*'} | {bold_changes(e.before.text, e.after.text)} |"
            for name, e in zip(view.names, view.effects)]
    return "\n".join(["| | intact | knocked out |", "|---|---|---|", *rows])


def verdict(view: KnockoutView) -> str:
    """What the numbers on screen say about the part's claim, in words."""
    a = view.effects[0]
    part = view.knockout.parts[0]
    mean = (float(np.mean(a.probabilities_before)), float(np.mean(a.probabilities_after)))
    probabilities = (f"A's intact translation, scored token by token: mean p {mean[0]:.2f} intact, {mean[1]:.2f} "
                     f"knocked out.")
    if part == "positions":
        r = view.effects[view.names.index("A's words reversed")]
        if view.reversal_holds:
            said = (f"**The claim holds on this model.** A's words reversed are the same tokens in another order: "
                    f"intact they translate differently (“{md(r.before.text)}”), knocked out exactly as A does. "
                    f"Without positions the model reads a bag of tokens.")
        else:
            said = ("A's words reversed are not the same tokens (the tokenizer cuts them differently), so the test "
                    "does not apply to this sentence.")
        if "B" in view.names:
            said += " " + _b_against_a(a, view.effects[1])
        return f"{said}  \n{probabilities}"
    if part == "scale":
        before, after = a.entropy
        return (f"The attention's rows sharpen: mean entropy {before:.2f} → {after:.2f} nats in {md(_map_name(a))} "
                f"(0: all weight on one token). The translation is {'changed' if a.changed else 'unchanged'}.  \n"
                f"{probabilities}")
    if part == "causal_mask":
        moved = float(np.mean(np.abs(a.probabilities_after - a.probabilities_before)))
        return (f"The translation is {'changed' if a.changed else '**unchanged**'}: decoding one token at a time has "
                f"no later tokens to see. Teacher forced, the same tokens' probabilities moved by {moved:.2f} on "
                f"average: each position now reads the words after it, which training never let it do.")
    line = (f"The translation is {'changed' if a.changed else 'unchanged'}. {probabilities} "
            f"{md(a.neighbour.why[0].upper() + a.neighbour.why[1:])}: {a.attention_shift:.2f} of its weight moved.")
    if part == "hide_source_token":
        hidden = a.source_tokens[view.knockout.hide_source_token]
        line += (f" No decoder position may look at {md(plots.shown(hidden))} now; where the word still comes out, "
                 f"the encoder's self-attention carried it into its neighbours.")
    return line


def _b_against_a(a: Any, b: Any) -> str:
    """Positions knocked out: what sentence B's line says beside A's."""
    same = "they come out the same" if a.after.text == b.after.text else "compare the two lines"
    if Counter(a.source_tokens) == Counter(b.source_tokens):
        return f"B is A's tokens in another order: knocked out, {same}."
    others = [plots.shown(t) for t in (Counter(b.source_tokens) - Counter(a.source_tokens))][:3]
    return (f"B has tokens A has not ({md(', '.join(others))}), so it may differ even without positions; knocked out, "
            f"{same}.")


def _map_name(e: Any) -> str:
    words = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
    return f"{words[e.neighbour.stack]}, layer {e.neighbour.layer + 1}"


def figures_of(view: KnockoutView) -> tuple:
    """(probabilities, attention) of sentence A."""
    a, model = view.effects[0], plots.label(view.model)
    probabilities = figures.probabilities_before_after(
        a.tokens, a.probabilities_before, a.probabilities_after, f"{model} · A's translation, token by token")
    attention = figures.attention_before_after(a.attention_before.mean(axis=0), a.attention_after.mean(axis=0),
                                               a.query_tokens, a.key_tokens, _map_name(a),
                                               f"{model} · the attention that reads the part (mean of its heads)")
    return probabilities, attention


def knock_out(registry: ModelRegistry, name: str | None, first: str, second: str, part_label: str,
              where: str | None) -> tuple:
    """(claim, translations, verdict, probabilities plot, attention plot, why that map, notices, the View)."""
    part = PART_LABELS.get(part_label, part_label)
    try:
        view = numbers.knockout_view(registry, name, first, second, part, where)
    except Refused as why:
        return (claim_line(part), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(),
                f"**Cannot knock out:** {md(clip(why, 300))}", gr.skip())
    probabilities, attention = figures_of(view)
    shown = View(tab=SLUG, model=name, source=first or None, second=second or None, part=part,
                 where=None if where in (None, "") or part in ("positions", "scale", "causal_mask") else str(where))
    near = view.effects[0].neighbour
    why = (f"*Why this map:* {md(near.why)}. The attention of {md(_map_name(view.effects[0]))}, teacher forced on A's "
           f"intact translation both times.")
    return (claim_line(part), translations(view), verdict(view), probabilities, attention, why,
            notice_lines(view.notices), shown)


def score_corpus(registry: ModelRegistry, name: str | None, part_label: str, where: str | None, corpus: str,
                 split: str, n: float, progress: gr.Progress = gr.Progress()) -> tuple:  # noqa: B008 (Gradio's way)
    """(the figure, the table and the examples that changed, notes)."""
    part = PART_LABELS.get(part_label, part_label)
    try:
        done = [0]

        def step(k: int) -> None:
            done[0] += k
            progress((done[0], 2 * int(n)), desc="translating, intact then knocked out", unit="sentences")

        effect, described, notices = numbers.corpus_view(registry, name, part, where, corpus, split, n, step)
    except Refused as why:
        return gr.skip(), f"**Cannot score:** {md(clip(why, 300))}"
    before = {"bleu": effect.before.bleu, "chrf": effect.before.chrf}
    after = {"bleu": effect.after.bleu, "chrf": effect.after.chrf}
    figure = figures.corpus_before_after(before, after, f"{plots.label(str(name))} · {effect.before.n} sentences, "
                                                        f"{plots.label(PART_NAMES[part])} knocked out")
    lines = [f"On {md(described)}, greedy: BLEU {before['bleu']:.2f} → {after['bleu']:.2f}, chrF "
             f"{before['chrf']:.2f} → {after['chrf']:.2f} (sacreBLEU); {effect.changed} of {effect.before.n} "
             f"translations changed."]
    lines += [f"- {md(clip(s, 120))}: {md(clip(b, 120))} → {bold_changes(b, a)}" for s, b, a in effect.examples]
    return figure, "\n".join(lines + ([notice_lines(notices)] if notices else []))


# ----- /knock_out --------------------------------------------------------------------------------
def knock_out_api(registry: ModelRegistry, model: str, source: str, part: str = "positions", where: str = "",
                  second: str = "", corpus: str = "", split: str = "valid", sentences: int = 0) -> dict:
    """The source (and a second sentence) intact and with the part knocked out: translations, each token's
    probability, the attention that reads the part; with a corpus and sentences > 0, BLEU and chrF before and after
    on its first sentences (as many as the request's budget affords)."""
    try:
        answer = numbers.knockout_json(numbers.knockout_view(registry, model, source, second, part, where))
        if corpus and sentences:
            effect, described, notices = numbers.corpus_view(registry, model, part, where, corpus, split, sentences)
            answer["corpus"] = numbers.corpus_json(effect, described)
            answer["notices"] = answer["notices"] + notices
    except Refused as why:
        raise refusal(why) from None
    return answer


def register(registry: ModelRegistry) -> None:
    """Add /knock_out to the Blocks being built (a closure: Gradio reads an endpoint's parameters from its hints)."""
    def knock_out(model: str, source: str, part: str = "positions", where: str = "", second: str = "",
                  corpus: str = "", split: str = "valid", sentences: int = 0) -> dict:
        return knock_out_api(registry, model, source, part, where, second, corpus, split, sentences)

    knock_out.__doc__ = knock_out_api.__doc__
    gr.api(guard(knock_out), api_name="knock_out", **HEAVY)


# ----- a link ---------------------------------------------------------------------------------------
def linked(registry: ModelRegistry, view: View | None) -> tuple:
    """A page opened on a Knock out link: its sentences, part and place set, and the tab to be drawn afresh."""
    if view is None or view.tab != SLUG:
        return (gr.skip(),) * 5
    part = view.part or FIRST_PART
    label = next(lb for lb, p in PART_LABELS.items() if p == part)
    where = where_options(registry, view.model, part, view.source or "")
    if view.where is not None and where["visible"]:
        where["value"] = view.where
    return (view.source if view.source is not None else gr.skip(), view.second or "", label, gr.Dropdown(**where),
            None)


# ----- the tab -------------------------------------------------------------------------------------------
def build(shell: Shell, tab: gr.Tab, on_screen: gr.State) -> tuple[gr.State, gr.State, list[dict]]:
    """Returns the View on screen (for "Link to this view"), what it was drawn for, and the steps that set the tab
    from a link and draw it."""
    registry = shell.registry
    first, second = first_sentences(registry, shell.model.value)
    drawn, shown = gr.State(None), gr.State(None)  # drawn: the model key the view on screen was drawn for
    gr.Markdown(INTRO)
    with gr.Row(equal_height=True):
        # min_width: on a phone the place goes under the parts, not into a sliver beside them.
        part = gr.Radio(list(PART_LABELS), value=next(iter(PART_LABELS)), label="Part to knock out", scale=3,
                        min_width=320, elem_id="knockout-part")
        where = gr.Dropdown(**where_options(registry, shell.model.value, FIRST_PART, first), scale=1, min_width=260,
                            elem_id="knockout-where")
    claim = gr.Markdown(claim_line(FIRST_PART), elem_id="knockout-claim")
    with gr.Row(equal_height=True):
        # min_width: on a phone one box a line, not two squeezed side by side.
        sentence_a = gr.Textbox(label="Sentence A", value=first, scale=3, min_width=280, max_lines=3,
                                elem_id="knockout-a")
        sentence_b = gr.Textbox(label="Sentence B, to compare (optional)", value=second, scale=3, min_width=280,
                                max_lines=3, elem_id="knockout-b")
        run = gr.Button("Knock out", variant="primary", scale=0, min_width=130, elem_id="knockout-run")
    notices = gr.Markdown(elem_classes="announce")
    table = gr.Markdown(elem_id="knockout-translations")
    said = gr.Markdown(elem_id="knockout-verdict")
    probabilities = gr.Plot(label="Each token's probability, intact and knocked out")
    attention = gr.Plot(label="The attention that reads the part, before and after")
    why = gr.Markdown(elem_id="knockout-why-this-map")
    _corpus_panel(shell, part, where)

    inputs = [shell.model, sentence_a, sentence_b, part, where]
    outputs = [claim, table, said, probabilities, attention, why, notices, shown]
    event = dict(fn=guard(partial(knock_out, registry)), inputs=inputs, outputs=outputs, api_visibility="private",
                 **HEAVY)
    # Drawn when the tab comes on screen for a model not drawn yet: the first view teaches without a click.
    first_draw = dict(fn=guard(partial(draw_if_new, registry)), inputs=[on_screen, drawn, shell.model_key, *inputs],
                      outputs=[*outputs, drawn], api_visibility="private", **HEAVY)
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden", api_visibility="private").then(**first_draw)
    gr.on([run.click, sentence_a.submit, sentence_b.submit, where.input], trigger_mode="always_last", **event)
    part.input(guard(partial(where_update, registry)), inputs=[shell.model, part, sentence_a, where], outputs=where,
               show_progress="hidden", api_visibility="private").then(**event)
    # Another model: its places, and a fresh draw once on screen. The sentences stay (a link may have just set them).
    shell.model_key.change(guard(partial(where_update, registry)), inputs=[shell.model, part, sentence_a, where],
                           outputs=where, show_progress="hidden", api_visibility="private").then(
        forget_drawn, inputs=drawn, outputs=drawn, show_progress="hidden", api_visibility="private").then(**first_draw)
    register(registry)
    return shown, drawn, [dict(fn=partial(linked, registry), outputs=[sentence_a, sentence_b, part, where, drawn],
                        show_progress="hidden", api_visibility="private"), first_draw]


def draw_if_new(registry: ModelRegistry, screen: str, drawn: Any, key: Any, *inputs: Any) -> tuple:
    """knock_out's view and the key it was drawn for, when the tab is on screen and not drawn for this model."""
    if screen != TAB_ID or drawn in (key, LINK_PENDING):
        return (gr.skip(),) * 9
    return (*knock_out(registry, *inputs), key)


def _corpus_panel(shell: Shell, part: gr.Radio, where: gr.Dropdown) -> None:
    """The first N sentences of a corpus, translated intact and knocked out: BLEU and chrF of each."""
    registry = shell.registry
    with gr.Accordion("On a corpus: BLEU and chrF before and after", open=False, elem_id="knockout-corpus"):
        with gr.Row(equal_height=True):
            corpus = gr.Dropdown(list(comparison.CORPORA), value=corpus_default(registry, shell.model.value),
                                 label="Corpus", scale=2)
            split = gr.Radio(list(comparison.SPLITS), value="valid", label="Split", scale=2)
            n = Slider(1, comparison.MAX_SENTENCES, value=comparison.DEFAULT_SENTENCES, step=1,
                       label="first N sentences", scale=2)
            score = gr.Button("Translate them both ways", scale=0, min_width=150, elem_id="knockout-score")
        figure = gr.Plot(label="BLEU and chrF, intact and knocked out")
        notes = gr.Markdown(elem_id="knockout-corpus-notes")
    score.click(guard(partial(score_corpus, registry)), inputs=[shell.model, part, where, corpus, split, n],
                outputs=[figure, notes], api_visibility="private", **HEAVY)
    shell.model_key.change(guard(partial(corpus_default, registry)), inputs=shell.model, outputs=corpus,
                           show_progress="hidden", api_visibility="private")
