"""What if: the model's view of a target you type for a source. Each target token's probability and
rank (teacher forcing: the model reads your tokens before it, not its own), its own choice where it
would have written another, and the whole target's score beside its own translation's; or the start
of a translation, finished by the model. "Show in Attention tab" hands the pair to the other tabs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import gradio as gr

from core.bundle import ModelBundle
from core.inference.options import DecodeOptions
from core.inference.scoring import Score
from core.inference.translation import translate_detailed

from .. import plots
from ..components import refresh_on_screen
from ..numbers.explanations import Refused, score, source_text, target_text, totals
from ..server import slots
from ..server.guard import guard
from ..server.limits import HEAVY
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Current, Shell
from ..text import clip, md, md_table
from .attention import TAB_ID as ATTENTION_TAB

TAB_ID = "what-if"
INTRO = ("**What if** the translation were another? Edit the target (it starts as the model's own translation) "
         "and press **Score**: each token is coloured by the probability the model gives it after the source and "
         "your tokens before it. Or type the beginning of a translation and press **Finish it**: the model "
         "writes the rest, with the Translate tab's decoding settings.")
NOTHING_YET = "*Type a source sentence and a target, or translate a sentence on the Translate tab first.*"
# (∣, not |: a bar would end the table's cell.)
TOTALS_HEADERS = ["", "log P(target ∣ source)", "mean log p per token", "perplexity", "mean rank", "tokens"]


@dataclass
class Scored:
    """The last target scored here, with the model's own translation of the same source (kept: scoring
    another target for that source needs no new translation)."""

    model: str
    key: tuple | None
    bundle: ModelBundle
    source: str
    options: DecodeOptions
    own: list[int]  # the model's translation of source (ids, no bos/eos)
    own_score: Score
    target: Score

    @property
    def forced(self) -> list[int]:
        """The target's ids as scored (<eos> off): what the Attention tab is handed."""
        return self.target.ids[:-1]


def describe(options: DecodeOptions) -> str:
    """Decoding settings in a few words."""
    if options.method == "beam":
        return f"beam search (beam {options.beam_size}, α {options.alpha:g})"
    if options.method == "sample":
        return f"sampling (temperature {options.temperature:g}, top-p {options.top_p:g})"
    return "greedy decoding"


def _model_of(registry: ModelRegistry, current: Current | None, name: str | None, source: str
              ) -> tuple[ModelBundle, tuple | None, DecodeOptions]:
    """The weights to score with: those that made the current translation when it is this source's with the
    picked model (a model training live has newer ones by now), else the picked model's newest."""
    key = registry.key(name)
    options = (current.options if current and current.options else DecodeOptions())
    if current and current.bundle is not None and current.key == key and current.source == source:
        return current.bundle, key, options
    try:
        return registry.get(name), key, options
    except UNAVAILABLE as exc:
        raise Refused(str(exc)) from None


def _own_translation(bundle: ModelBundle, source: str, options: DecodeOptions, current: Current | None,
                     kept: Scored | None) -> tuple[list[int], list[str]]:
    """The model's own translation of source (ids) and its notices: the kept one or the Translate tab's when
    they are of these weights and source, else translated now."""
    if kept is not None and kept.bundle is bundle and kept.source == source:
        return kept.own, []
    if current is not None and current.bundle is bundle and current.source == source:
        return list(current.ids), []
    try:
        t = translate_detailed(bundle, [source], options)[0]
    except ValueError as exc:  # an option this model cannot take (a beam wider than a tiny vocabulary)
        raise Refused(str(exc)) from None
    return list(t.ids), t.notices


def _scored(registry: ModelRegistry, kept: Scored | None, current: Current | None, name: str | None, source: str,
            target: str | list[int]) -> tuple[Scored, list[str]]:
    """Score target for source beside the model's own translation (one core.score call for both)."""
    bundle, key, options = _model_of(registry, current, name, source)
    with slots.heavy():
        own, notices = _own_translation(bundle, source, options, current, kept)
        if isinstance(target, str) and target.strip() == bundle.target_tokenizer.decode(own):
            target = own  # the translation's very tokens: its text could tokenize otherwise
        mine, theirs = score(bundle, source, [target, own])
    return Scored(str(name), key, bundle, source, options, own, theirs, mine), notices + mine.notices


def totals_table(s: Scored) -> str:
    """Your target's score beside the model's own translation's, and which the model prefers."""
    def row(label: str, score_: Score) -> list:
        t = totals(score_)
        return [label, *(f"{t[k]:.3f}" if t[k] is not None else "–" for k in ("logprob", "mean", "perplexity")),
                f"{t['mean_rank']:.2f}" if t["mean_rank"] is not None else "–", len(score_.tokens)]
    own_text = s.bundle.target_tokenizer.decode(s.own) or "(empty)"
    rows = [row("your target", s.target), row("the model's translation", s.own_score)]
    return (md_table(TOTALS_HEADERS, rows, numeric=(1, 2, 3, 4, 5)) +
            f"\n\nThe model's translation, by {md(describe(s.options))}: “{md(own_text)}”  \n" + verdict(s))


def verdict(s: Scored) -> str:
    """Which of the two the model finds more likely, in words (log-probabilities: sums over the tokens)."""
    if s.target.ids == s.own_score.ids:
        return "*Your target is the model's own translation.*"
    gap = s.target.sum - s.own_score.sum
    times = f"{math.exp(min(abs(gap), 700)):,.3g}"  # e^gap: how many times more likely
    if gap > 0:
        return (f"*The model finds **your target more likely**, by {gap:.2f} nats ({times} times): its decoder "
                f"did not find it (a search error), or its length penalty ranked it lower.*")
    return f"*The model finds **its own translation more likely**, by {-gap:.2f} nats ({times} times).*"


def shown(s: Scored, notices: list[str]) -> tuple:
    """(chips, totals, plot, notices) of a scored target."""
    t = s.target
    chips = plots.token_chips(t.tokens, t.token_logprobs, t.ranks, t.alternatives, "Your target, token by token")
    figure = plots.target_probabilities(t.tokens, t.token_logprobs, t.ranks, t.alternatives,
                                        f"{plots.label(s.model)} · each target token's probability (teacher forced)")
    return chips, totals_table(s), figure, "\n".join(f"- {md(clip(n, 300))}" for n in notices)


def refused(why: object, what: str = "score") -> tuple:
    """What the tab shows when it cannot act: the reason on the notice line, the view left as it was."""
    return gr.skip(), gr.skip(), gr.skip(), f"**Cannot {what}:** {md(clip(why, 300))}", gr.skip()


def score_target(registry: ModelRegistry, kept: Scored | None, current: Current | None, name: str | None,
                 source: str, target: str) -> tuple:
    """Score: (chips, totals, plot, notices, the Scored kept)."""
    try:
        source, cleaned = source_text(source)
        target, cut = target_text(target)
        s, notices = _scored(registry, kept, current, name, source, target)
    except Refused as why:
        return refused(why)
    return (*shown(s, cleaned + cut + notices), s)


def finish(registry: ModelRegistry, kept: Scored | None, current: Current | None, name: str | None, source: str,
           prefix: str) -> tuple:
    """Finish it: the model completes the beginning typed in the target box, then the whole is scored:
    (the target box, chips, totals, plot, notices, the Scored kept)."""
    try:
        source, cleaned = source_text(source)
        prefix, cut = target_text(prefix)
        if not prefix.strip():
            raise Refused("type the beginning of a translation in the target box first")
        bundle, _, options = _model_of(registry, current, name, source)
        with slots.heavy():  # one slot for the completion and its score
            try:
                t = translate_detailed(bundle, [source], options, prefix=prefix)[0]
            except ValueError as exc:  # a prefix this vocabulary cannot write, or too long
                raise Refused(str(exc)) from None
            s, notices = _scored(registry, kept, current, name, source, list(t.ids))
    except Refused as why:
        return gr.skip(), *refused(why, "finish")
    said = (f"Finished by {describe(s.options)} (the Translate tab's settings) after your first "
            f"{t.prefix_length} token{'s' * (t.prefix_length != 1)}.")
    return t.text, *shown(s, [said, *cleaned, *cut, *t.notices, *notices]), s


def show_in_attention(registry: ModelRegistry, kept: Scored | None, current: Current | None, name: str | None,
                      source: str, target: str) -> tuple:
    """Hand the pair in the boxes to the other tabs (Current.forced) and open the Attention tab; a pair not
    scored yet (edited since) is scored first. (Current, the tab on screen, the Tabs, chips, totals, plot,
    notices, the Scored kept.)"""
    view = (gr.skip(),) * 5
    if not _is_kept(kept, registry.key(name), source, target):
        view = score_target(registry, kept, current, name, source, target)
        if not isinstance(view[-1], Scored):  # refused: the reason is on the notice line
            return gr.skip(), gr.skip(), gr.skip(), *view
        kept = view[-1]
    handed = Current(kept.model, kept.source, kept.own, kept.options, kept.key, kept.bundle, forced=kept.forced)
    return handed, ATTENTION_TAB, gr.Tabs(selected=ATTENTION_TAB), *view


def _is_kept(kept: Scored | None, key: tuple | None, source: str, target: str) -> bool:
    """Whether kept is the boxes' pair, scored by the picked model."""
    if kept is None or kept.key != key or not (source or "").strip():
        return False
    text = target_text(target)[0]
    ids = kept.bundle.target_tokenizer.encode(text) if text.strip() else []
    return kept.source == source_text(source)[0] and kept.forced == ids


def _pair_of(current: Current) -> tuple[str, str]:
    return current.source, current.bundle.target_tokenizer.decode(current.target_ids)


def _is_new(current: Current | None, drawn: Current | None, on_screen: str) -> bool:
    return on_screen == TAB_ID and current is not None and current != drawn


def fill(current: Current | None, drawn: Current | None, on_screen: str, source: str, target: str) -> tuple:
    """A new current translation, seen on this tab: its pair in the boxes at once (no model runs), unless the
    visitor typed there (the boxes hold something other than the pair shown last). (source, target)."""
    if not _is_new(current, drawn, on_screen) or not current.source or current.bundle is None:
        return gr.skip(), gr.skip()
    shown_last = _pair_of(drawn) if drawn is not None and drawn.source and drawn.bundle is not None else ("", "")
    if (source or target) and (source, target) != shown_last:
        return gr.skip(), gr.skip()
    return _pair_of(current)


def refresh(registry: ModelRegistry, kept: Scored | None, current: Current | None, drawn: Current | None,
            on_screen: str, name: str | None, source: str, target: str) -> tuple:
    """Then the boxes scored, as fill() left them: (source, target, chips, totals, plot, notices, Scored, drawn).
    Scoring takes a second: what is typed meanwhile is not overwritten, since the boxes were filled before. Boxes
    still empty (this step began before fill() saw the new translation, as the tab opened) get its pair here."""
    if not _is_new(current, drawn, on_screen):
        return (gr.skip(),) * 8
    if not current.source or current.bundle is None:
        return (gr.skip(),) * 5 + (NOTHING_YET, gr.skip(), current)
    boxes = (gr.skip(), gr.skip())
    if not (source or "").strip() and not (target or "").strip():
        source, target = boxes = _pair_of(current)
    chips, table, plot, notices, scored = score_target(registry, kept, current, name, source, target)
    if (source, target) != _pair_of(current):
        notices = ("*Kept what you typed in the boxes; the Translate tab's latest sentence is "
                   f"“{md(clip(current.source, 80))}”: clear the boxes to see it here.*\n{notices or ''}")
    return *boxes, chips, table, plot, notices, scored, current


def model_changed(registry: ModelRegistry, kept: Scored | None, name: str | None) -> tuple:
    """Another model picked (or a new run under its name): the scores on screen are not its own."""
    if kept is None or kept.key == registry.key(name):
        return (gr.skip(),) * 5
    return ("", "", plots.empty("Press Score for the picked model's view."),
            "*Another model is picked: press Score for its view of the target.*", None)


def build(shell: Shell, current: gr.State, tab: gr.Tab, tabs: gr.Tabs, on_screen: gr.State) -> None:
    """current: the session's Current (read, and written by Show in Attention tab); tabs: the page's tabs."""
    kept, drawn = gr.State(None), gr.State(None)
    gr.Markdown(INTRO)
    with gr.Row():
        # min_width: on a phone the two boxes take a line each (side by side, each was 3 words wide).
        # "Source", not the Translate tab's "Source sentence": a label names one box on the page.
        source = gr.Textbox(label="Source", lines=1, max_lines=4, scale=1, min_width=300)
        target = gr.Textbox(label="Target: a translation, or its beginning", lines=1, max_lines=4, scale=1,
                            min_width=300, placeholder="Type a translation and press Enter")
    with gr.Row():
        score_button = gr.Button("Score", variant="primary")
        finish_button = gr.Button("Finish it")
        show_button = gr.Button("Show in Attention tab")
    notices = gr.Markdown(elem_classes="announce")
    chips = gr.HTML(elem_id="what-if-tokens")
    table = gr.Markdown(elem_id="what-if-totals")
    plot = gr.Plot(label="Target token probabilities")
    view = [chips, table, plot, notices, kept]
    inputs = [kept, current, shell.model, source]
    gr.on([score_button.click, target.submit], guard(partial(score_target, shell.registry)),
          inputs=[*inputs, target], outputs=view, api_name="what_if_score", **HEAVY)
    finish_button.click(guard(partial(finish, shell.registry)), inputs=[*inputs, target], outputs=[target, *view],
                        api_name="what_if_finish", **HEAVY)
    show_button.click(guard(partial(show_in_attention, shell.registry)), inputs=[*inputs, target],
                      outputs=[current, on_screen, tabs, *view], api_name="what_if_show", **HEAVY)
    filled = dict(fn=guard(fill), inputs=[current, drawn, on_screen, source, target], outputs=[source, target],
                  show_progress="hidden", api_visibility="private")
    scored = dict(fn=guard(partial(refresh, shell.registry)),
                  inputs=[kept, current, drawn, on_screen, shell.model, source, target],
                  outputs=[source, target, *view, drawn],
                  api_visibility="private", **HEAVY)
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden", api_visibility="private").then(
        **filled).then(**scored)
    refresh_on_screen(current, "tab-what-if").click(**filled, trigger_mode="always_last").then(**scored)
    shell.model_key.change(guard(partial(model_changed, shell.registry)), inputs=[kept, shell.model],
                           outputs=[chips, table, plot, notices, kept], show_progress="hidden",
                           api_visibility="private")
