"""The Knock out and Word choice tabs' views, each a line in a notebook: a part of the paper's model switched off
and a sentence before and after (3.1-3.5's claims, core.explain.knocked_out), what each decoder layer would write
(the logit lens), the reference after its own words and after the model's (teacher forcing against free running),
and why one word and not another (a contrastive attribution).

A knock-out runs on the model it is given and restores it on the way out: not while another thread uses it."""
from __future__ import annotations

from core.data.batching import source_ids
from core.explain.knockout_effect import knockout_effect

from .. import plots
from ..numbers import knockout as knockouts
from ..numbers import word_choice
from ..plots import knockout as knockout_plots
from ..plots import word_choice as word_choice_plots
from .models import Model, bundle_of
from .view import View, notes

KNOCKOUT_PARTS = ("probabilities", "attention")


def knockout(model: Model, source: str, *, part: str = "positions", where: str | None = None,
             show: str = "probabilities") -> View:
    """The Knock out tab: `part` of the model switched off ("positions", "scale", "residual", "layernorm", "layer",
    "heads", "causal_mask", "hide_source_token"; `where` in core's spelling, counted from 0: "decoder.2.cross",
    "encoder.1", "cross.2.1", a source token's index; None: the tab's first place), the sentence's greedy translation
    before and after. show: each token's probability before and after ("probabilities"), or the attention that reads
    the part ("attention"). numbers: /knock_out's JSON of the sentence."""
    if show not in KNOCKOUT_PARTS:
        raise ValueError(f"unknown show {show!r}; allowed: {', '.join(KNOCKOUT_PARTS)}")
    bundle = bundle_of(model).toward(None)
    config = bundle.model.config
    if where is None:
        where = knockouts.default_where(part, config, bundle.tokenizer.tokens(source_ids(bundle.tokenizer, source)))
    e = knockout_effect(bundle, source, knockouts.knockout_of(part, where, config), knockouts.GREEDY)
    name = plots.label(bundle.name)
    if show == "probabilities":
        figure = knockout_plots.probabilities_before_after(e.tokens, e.probabilities_before, e.probabilities_after,
                                                           f"{name} · the translation, token by token")
    else:
        what = f"{knockouts.HEAD_STACK_WORDS[e.neighbour.stack]}, layer {e.neighbour.layer + 1}"
        title = f"{name} · the attention that reads the part (mean of its heads)"
        figure = knockout_plots.attention_before_after(e.attention_before.mean(axis=0), e.attention_after.mean(axis=0),
                                                       e.query_tokens, e.key_tokens, what, title)
    note = notes([f"intact: {e.before.text}", f"knocked out ({knockouts.PART_NAMES[part]}): {e.after.text}",
                   *e.notices])
    return View(figure, knockouts.effect_json("A", e), note, f"knock-out, {show}")


def logit_lens(model: Model, source: str, *, top_k: int = word_choice.TOP_K) -> View:
    """What each decoder layer would write at each position of the model's greedy translation, read through the
    output projection (the logit lens); numbers: /logit_lens's JSON (each layer's top tokens, the rank of the word
    written, where it is decided)."""
    bundle = bundle_of(model)
    lens = word_choice.lens(bundle, source, top_k)
    figure = word_choice_plots.logit_lens_map(lens, f"{plots.label(bundle.name)} · what each decoder layer would write")
    return View(figure, word_choice.lens_json(lens), notes(lens.notices), "logit lens")


def free_running(model: Model, source: str, reference: str) -> View:
    """The reference's tokens after its own prefix (teacher forcing, as the model trained) and after the model's
    greedy one (as it translates); numbers: /free_running's JSON."""
    bundle = bundle_of(model)
    f = word_choice.exposure(bundle, source, reference)
    figure = word_choice_plots.free_running_bars(f, f"{plots.label(bundle.name)} · the reference after its own words "
                                                    f"and after the model's")
    return View(figure, word_choice.exposure_json(f), notes(f.notices), "free running")


def why_not(model: Model, source: str, *, position: int = 1, foil: str | None = None,
            method: str = "integrated_gradients") -> View:
    """Why the model wrote its word at `position` (from 0) of its greedy translation and not `foil` (None: the last
    layer's runner-up there): each source token's share of the difference, beside the cross-attention. numbers:
    /contrast's JSON."""
    bundle = bundle_of(model)
    if foil is None:
        foil = word_choice.runner_up(word_choice.lens(bundle, source), position)
    c = word_choice.why_not(bundle, source, position, foil, "probability", "", method)
    figure = word_choice_plots.contrast_bars(c, f"{plots.label(bundle.name)} · why {plots.label(c.token)} and not "
                                                f"{plots.label(c.foil)}?")
    return View(figure, word_choice.contrast_json(c), notes(c.notices), "why not")
