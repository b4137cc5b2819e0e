"""Compare: two models side by side (post-norm vs pre-norm, sinusoidal vs learned positions, 1 head vs 8,
an early vs a late checkpoint of a run). One sentence through both: the translations with their
differences marked, each output token's probability, the cross-attention maps on one colour scale; a small
corpus score of each; and our Table 3 (bench/table3.py) beside the paper's. /compare gives the numbers as JSON.
"""
from __future__ import annotations

import html
from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from ..components import Slider
from ..numbers import comparison
from ..numbers.comparison import DECODINGS, Refused, Side
from ..plots import empty, label, side_by_side
from ..server.guard import guard
from ..server.limits import HEAVY
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Shell, picked_examples
from ..text import clip, md, refusal, word_diff

TAB_ID = "compare"
INTRO = ("**Compare** two models on the same sentence: the natural pairs are post-norm vs pre-norm, sinusoidal vs "
         "learned positions, 1 head vs 8, or an early vs a late checkpoint of one run. Each model reads and writes "
         "with its own vocabulary. Model A is drawn in blue, model B in orange.")
LAST, MEAN = "last", "mean of the heads"
# One click: the caption model against the everyday one on what a person types, a lesson in domain shift (issue 61).
DOMAIN_SHIFT = ("multi30k-de-en-small", "tatoeba-de-en", "Ich habe heute keine Zeit.")
DOMAIN_SHIFT_LABEL = "Captions vs everyday German: one sentence, two training sets"
TABLE3_NOTE = ("*Our Table 3 is not scored yet: `bench/table3.py` writes `docs/table3.csv` once its runs are trained "
               "and scored. The recipe and the paper's figures are in `docs/table3.md`.*")


# ----- the two translations -------------------------------------------------------------------
def _words(words: list[str], marked: str | None) -> str:
    text = html.escape(" ".join(words), quote=False)
    return f'<mark class="compare-only-{marked}">{text}</mark>' if marked and words else text


def diff_html(a: Side, b: Side) -> str:
    """Both translations, the words only one of them has marked in its model's colour (and underlined)."""
    lines = {"A": [], "B": []}
    for tag, words_a, words_b in word_diff(a.translation.text, b.translation.text):
        lines["A"].append(_words(words_a, None if tag == "equal" else "a"))
        lines["B"].append(_words(words_b, None if tag == "equal" else "b"))
    same = a.translation.text == b.translation.text
    rows = "".join(
        f'<p class="compare-line"><span class="compare-tag compare-tag-{w.lower()}">{w}</span> '
        f'<span class="compare-name">{html.escape(side.name, quote=False)}</span><br>'
        f'<span class="compare-text">{" ".join(x for x in lines[w] if x) or "<i>(empty)</i>"}</span></p>'
        for w, side in (("A", a), ("B", b)))
    legend = ("The two translations are the same." if same else
              "Marked: the words only that translation has (word by word, difflib).")
    return f'<div class="compare-diff">{rows}<p class="compare-legend">{legend}</p></div>'


def _picks(layer: str | None, head: str | None) -> tuple[int | None, int | None]:
    """The layer and head pickers' choices as indices (None: the last layer; the mean of the heads)."""
    def index(choice: str | None, default: str) -> int | None:
        return None if not choice or choice == default or not str(choice).isdecimal() else int(choice) - 1
    return index(layer, LAST), index(head, MEAN)


def attention_figure(sides: tuple[Side, Side] | None, layer: str | None, head: str | None) -> go.Figure:
    """The two cross-attention maps side by side, on one colour scale."""
    if not sides:
        return empty("Press Compare to see both models' cross-attention.")
    picked = _picks(layer, head)
    maps = []
    for which, side in zip("AB", sides):
        weights, what = comparison.attention_view(side, *picked)
        maps.append((weights, side.target_tokens, side.translation.source_tokens,
                     f"{which}: {label(clip(side.name, 40))} ({what})"))
    return side_by_side.cross_attention_pair(maps,
                                             "Cross-attention, one colour scale for both (0 to the larger maximum)")


def pickers(sides: tuple[Side, Side]) -> tuple[gr.Dropdown, gr.Dropdown]:
    """Layer and head choices up to the larger model's (a smaller model shows its last layer, its mean)."""
    layers = max(s.cross.shape[0] for s in sides)
    heads = max(s.cross.shape[1] for s in sides)
    return (gr.Dropdown(choices=[LAST] + [str(i) for i in range(1, layers + 1)]),
            gr.Dropdown(choices=[MEAN] + [str(i) for i in range(1, heads + 1)]))


def notice_lines(notices: list[str]) -> str:
    """Notices as a Markdown list, each once."""
    return "\n".join(f"- {md(clip(n, 300))}" for n in dict.fromkeys(notices))


def run(registry: ModelRegistry, name_a: str | None, name_b: str | None, text: str, decoding: str,
        layer: str | None, head: str | None) -> tuple:
    """Compare: (translations, probability plot, attention plot, layer picker, head picker, notices, sides)."""
    try:
        a, b, cleaned = comparison.translate_both(registry, (name_a, name_b), text, decoding)
    except Refused as why:
        return (gr.skip(),) * 5 + (f"**Cannot compare:** {md(clip(why, 300))}", gr.skip())
    probabilities = side_by_side.probabilities_pair(
        [(s.name, s.target_tokens, s.probabilities) for s in (a, b)],
        f"Probability of each output token ({decoding} decoding)")
    notices = cleaned + [f"{w} ({s.name}): {n}" for w, s in (("A", a), ("B", b)) for n in s.notices]
    return (diff_html(a, b), probabilities, attention_figure((a, b), layer, head), *pickers((a, b)),
            notice_lines(notices), (a, b))


# ----- corpus scores ------------------------------------------------------------------------------
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "accuracy": "token accuracy (%)", "perplexity": "perplexity"}


def scores_html(names: tuple[str, str], a: dict[str, Any], b: dict[str, Any], comparable: bool) -> str:
    """A table of both models' scores, the better of each metric in bold and its model's colour."""
    head = "".join(f'<th class="compare-tag-{w.lower()}">{w}: {html.escape(n, quote=False)}</th>'
                   for w, n in zip("AB", names))
    rows = []
    for metric, title in METRIC_NAMES.items():
        winner = comparison.better(a, b, metric) if metric != "perplexity" or comparable else None
        cells = "".join(f'<td class="{"compare-better compare-better-" + w.lower() if w == winner else ""}">'
                        f'{scores[metric]:.2f}</td>' for w, scores in (("A", a), ("B", b)))
        hint = "lower is better" if metric == "perplexity" else "higher is better"
        rows.append(f"<tr><th scope='row'>{title} <small>({hint})</small></th>{cells}</tr>")
    return (f'<table class="compare-scores"><thead><tr><th></th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def score_corpus(registry: ModelRegistry, name_a: str | None, name_b: str | None, corpus: str, split: str,
                 n: float | None, decoding: str,
                 progress: gr.Progress = gr.Progress()) -> tuple[str, str]:  # noqa: B008 (Gradio's way to ask for one)
    """Score: (the table, the notes under it)."""
    try:
        bundles = [comparison.model(registry, name, which) for name, which in ((name_a, "A"), (name_b, "B"))]
        pairs, described, langs = comparison.corpus_pairs(corpus, split, n, bundles[0])
        done, total = [0], 2 * len(pairs)

        def step(k: int) -> None:
            done[0] += k
            progress((done[0], total), desc="translating", unit="sentences")

        progress((0, total), desc="translating", unit="sentences")
        scores, scored, cut = comparison.corpus_scores(bundles, pairs, decoding, step)
    except Refused as why:
        return gr.skip(), f"**Cannot score:** {md(clip(why, 300))}"
    comparable = comparison.same_target_vocabulary(*bundles)
    if scored < len(pairs):
        described = comparison.first_pairs(described, len(pairs), scored)
    notes = [f"On {described}; {decoding} decoding; BLEU and chrF by sacreBLEU; accuracy and perplexity teacher "
             f"forced, per token of each model's own target vocabulary.", *cut]
    for which, name, bundle in zip("AB", (name_a, name_b), bundles):
        if (direction := comparison.other_direction(bundle, langs)) is not None:
            notes.append(f"{which} ({name}) translates {direction}, not {langs[0]} → {langs[1]}: its scores here "
                         f"only say that it was not trained for these pairs.")
    if not comparable:
        notes.append("The two models have different target vocabularies: their perplexities do not compare.")
    notes += [f"{w}: {s['left_out']} pairs longer than the model reads left out of accuracy and perplexity."
              for w, s in zip("AB", scores) if s["left_out"]]
    return scores_html((str(name_a), str(name_b)), *scores, comparable), notice_lines(notes)


# ----- our Table 3 ---------------------------------------------------------------------------------
def table3(path: Path = comparison.TABLE3_CSV) -> tuple:
    """(figure or None, note): the plot when bench/table3.py has written its CSV, else a note pointing at the
    recipe."""
    try:
        rows = comparison.table3_rows(path)
    except Refused as why:
        return None, f"**Cannot show our Table 3:** {md(clip(why, 300))}"
    if not rows:
        return None, TABLE3_NOTE
    figure = side_by_side.table3(rows, "Our Table 3: each change from the base, beside the paper's")
    if figure is None:
        return None, f"{len(rows)} runs scored (`docs/table3.csv`), not yet the base they are drawn against."
    note = (f"{len(rows)} runs scored (`docs/table3.csv`; Multi30k De→En dev, the paper's newstest2013). Each bar is "
            f"a variant's change from its own base: our perplexities are per token of an 8k BPE, the paper's per "
            f"wordpiece of a 37k BPE, so only the changes compare. A change inside the grey band is no bigger than "
            f"the difference between two seeds of our base: noise. The recipe and what it shows: `docs/table3.md`.")
    return figure, note


def table3_view() -> tuple[gr.Plot, str]:
    """The accordion's plot (hidden while there is none) and its note, read again each time the tab opens:
    the Table 3 run writes its CSV while the studio is up."""
    figure, note = table3()
    return gr.Plot(value=figure, visible=figure is not None), note


# ----- the models offered ---------------------------------------------------------------------------
def model_choices(registry: ModelRegistry, a: str | None, b: str | None, follow: bool = True
                  ) -> tuple[gr.Dropdown, gr.Dropdown, str]:
    """Both pickers' choices as they are now (a Train tab may have added a run), keeping what is picked, and the
    pairing note. follow (model A just changed): B follows A to a model of A's language pair when it translates
    another (one sentence cannot be read by both); without it (the tab opened again) a B picked by hand stays."""
    names = registry.names()
    if follow and a in names and b in names and registry.languages(a) != registry.languages(b):
        b = defaults(registry, a)[1]
    a, b = (x if x in names else None for x in (a, b))
    return (*(gr.Dropdown(choices=registry.choices(), value=x) for x in (a, b)), pairing_note(registry, a, b))


def defaults(registry: ModelRegistry, selected: str | None) -> tuple[str | None, str | None]:
    """Model A: the shell's pick; model B: the next model of A's language pair (issue 51: a first view of
    German captions against an English number-words toy taught nothing), else A itself, as pairing_note says."""
    names = registry.names()
    a = selected if selected in names else (names[0] if names else None)
    pair = registry.languages(a)
    same = [n for n in names if n != a and registry.languages(n) == pair]
    return a, (same[0] if same else a)


def pairing_note(registry: ModelRegistry, a: str | None, b: str | None) -> str:
    """What the tab says when A is compared with itself (no other model of its language pair is offered), or with a
    model of another language pair."""
    if a is None or b is None:
        return ""
    if a != b:
        pairs = registry.languages(a), registry.languages(b)
        if None in pairs or pairs[0] == pairs[1]:
            return ""
        return (f"*Model A translates {'→'.join(pairs[0])} and model B {'→'.join(pairs[1])}: one sentence cannot "
                f"be read by both.*")
    pair = registry.languages(a)
    languages = f" ({pair[0]}→{pair[1]})" if pair else ""
    return (f"*Model B is model A itself: no other model of its language pair{languages} is offered. Train one on "
            f"the Train tab, or open one, to compare two.*")


def domain_shift(registry: ModelRegistry) -> tuple:
    """Model A the caption model, B the everyday one, and a sentence no caption holds; then the tab compares them."""
    a, b, sentence = DOMAIN_SHIFT
    if not {a, b} <= set(registry.names()):
        return gr.skip(), gr.skip(), gr.skip(), f"*{a} and {b} are not both offered here.*"
    return a, b, sentence, pairing_note(registry, a, b)


def corpus_default(registry: ModelRegistry, name: str | None) -> str:
    """The corpus model A most likely learnt from (its synthetic task, or Multi30k); else the first offered."""
    try:
        return comparison.corpus_for(registry.get(name))
    except UNAVAILABLE:  # no model, or one that no longer loads
        return next(iter(comparison.CORPORA))


# ----- /compare --------------------------------------------------------------------------------------
def compare_api(registry: ModelRegistry, model_a: str, model_b: str, source: str, decoding: str = "greedy",
                corpus: str = "", split: str = "valid", sentences: int = 0) -> dict:
    """Both models' translations of source, with each output token's probability and the word diff; with a
    corpus (one of the tab's) and sentences > 0, each model's BLEU, chrF, accuracy and perplexity on the first
    sentences of the split (as many as the request's budget affords: the notices say when that is fewer)."""
    try:
        a, b, notices = comparison.translate_both(registry, (model_a, model_b), source, decoding)
        answer = {"a": comparison.side_json(a), "b": comparison.side_json(b), "notices": notices,
                  "diff": [{"tag": tag, "a": x, "b": y} for tag, x, y in word_diff(a.translation.text,
                                                                                    b.translation.text)]}
        if corpus and sentences:
            pairs, described, _ = comparison.corpus_pairs(corpus, split, sentences, a.bundle)
            (score_a, score_b), scored, cut = comparison.corpus_scores([a.bundle, b.bundle], pairs, decoding)
            answer["scores"] = {"on": comparison.first_pairs(described, len(pairs), scored),
                                "a": comparison.scores_json(score_a), "b": comparison.scores_json(score_b)}
            answer["notices"] = notices + cut
    except Refused as why:
        raise refusal(why) from None
    return answer


def register(registry: ModelRegistry) -> None:
    """Add /compare to the Blocks being built (a closure: Gradio reads an endpoint's parameters from its hints)."""
    def compare(model_a: str, model_b: str, source: str, decoding: str = "greedy", corpus: str = "",
                split: str = "valid", sentences: int = 0) -> dict:
        return compare_api(registry, model_a, model_b, source, decoding, corpus, split, sentences)

    compare.__doc__ = compare_api.__doc__
    gr.api(guard(compare), api_name="compare", **HEAVY)


# ----- the tab -----------------------------------------------------------------------------------------
def build(shell: Shell, tab: gr.Tab) -> None:
    registry = shell.registry
    first_a, first_b = defaults(registry, shell.model.value)
    sides = gr.State(None)
    gr.Markdown(INTRO)
    with gr.Row():
        model_a = gr.Dropdown(registry.choices(), value=first_a, label="Model A (blue)", elem_id="compare-model-a")
        model_b = gr.Dropdown(registry.choices(), value=first_b, label="Model B (orange)", elem_id="compare-model-b")
    with gr.Row(equal_height=True):
        examples = picked_examples(registry, first_a)
        source = gr.Textbox(label="Sentence for both", value=examples[0] if examples else "", lines=1, max_lines=4,
                            scale=3, placeholder="Type a sentence and press Enter", elem_id="compare-source")
        decoding = gr.Radio(list(DECODINGS), value="greedy", label="Decoding (both models)", scale=1)
        compare_button = gr.Button("Compare", variant="primary", scale=0, min_width=120, elem_id="compare-run")
    shift = gr.Button(DOMAIN_SHIFT_LABEL, size="sm", elem_id="compare-domain-shift",
                      visible=set(DOMAIN_SHIFT[:2]) <= set(registry.names()))
    notices = gr.Markdown(pairing_note(registry, first_a, first_b), elem_classes="announce")
    translations = gr.HTML(elem_id="compare-translations")
    probabilities = gr.Plot(label="Output token probabilities, A and B")
    with gr.Row():
        layer = gr.Dropdown([LAST], value=LAST, label="Cross-attention: decoder layer", min_width=200)
        head = gr.Dropdown([MEAN], value=MEAN, label="Cross-attention: head", min_width=200)
    attention = gr.Plot(label="Cross-attention, A and B")
    _corpus_score(shell, model_a, model_b, decoding)
    with gr.Accordion("Our Table 3", open=False, elem_id="compare-table3"):
        table3_note = gr.Markdown(TABLE3_NOTE)
        table3_plot = gr.Plot(label="Our Table 3 and the paper's", visible=False)
    compare_event = dict(fn=guard(partial(run, registry)), inputs=[model_a, model_b, source, decoding, layer, head],
                         outputs=[translations, probabilities, attention, layer, head, notices, sides], **HEAVY)
    gr.on([compare_button.click, source.submit], api_visibility="private", **compare_event)
    shift.click(guard(partial(domain_shift, registry)), outputs=[model_a, model_b, source, notices],
                show_progress="hidden", api_visibility="private").then(**compare_event)
    gr.on([layer.input, head.input], guard(attention_figure), inputs=[sides, layer, head], outputs=attention,
          api_visibility="private", trigger_mode="always_last")
    tab.select(guard(partial(model_choices, registry, follow=False)), inputs=[model_a, model_b],
               outputs=[model_a, model_b, notices], show_progress="hidden", api_visibility="private").then(
        guard(table3_view), outputs=[table3_plot, table3_note], show_progress="hidden", api_visibility="private")
    # Model A follows the page's model picker (the model the other tabs show), with the choices as they are now:
    # a run the Train tab just started is among them.
    shell.model_key.change(guard(partial(model_choices, registry)), inputs=[shell.model, model_b],
                           outputs=[model_a, model_b, notices], show_progress="hidden", api_visibility="private")
    model_a.input(guard(partial(model_choices, registry)), inputs=[model_a, model_b],
                  outputs=[model_a, model_b, notices], show_progress="hidden", api_visibility="private")
    model_b.input(guard(partial(pairing_note, registry)), inputs=[model_a, model_b], outputs=notices,
                  show_progress="hidden", api_visibility="private")
    register(registry)


def _corpus_score(shell: Shell, model_a: gr.Dropdown, model_b: gr.Dropdown, decoding: gr.Radio) -> None:
    """The corpus score panel: a corpus, a split, how many sentences, and a table of both models' scores."""
    gr.Markdown("### Corpus score")
    with gr.Row(equal_height=True):
        corpus = gr.Dropdown(list(comparison.CORPORA), value=corpus_default(shell.registry, model_a.value),
                             label="Corpus", scale=2)
        split = gr.Radio(list(comparison.SPLITS), value="valid", label="Split", scale=2)
        n = Slider(1, comparison.MAX_SENTENCES, value=comparison.DEFAULT_SENTENCES, step=1, label="first N sentences",
                   scale=2)
        score_button = gr.Button("Score both", scale=0, min_width=120, elem_id="compare-score")
    table = gr.HTML(elem_id="compare-scores")
    notes = gr.Markdown()
    model_a.change(guard(partial(corpus_default, shell.registry)), inputs=model_a, outputs=corpus,
                   show_progress="hidden", api_visibility="private")
    score_button.click(guard(partial(score_corpus, shell.registry)),
                       inputs=[model_a, model_b, corpus, split, n, decoding], outputs=[table, notes],
                       api_visibility="private", **HEAVY)
