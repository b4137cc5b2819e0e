"""The numbers behind the Knock out tab and /knock_out: a part of the paper's model knocked out
(core.explain.knocked_out) on a private copy of the model (the registry's, under its lock: no other visitor's
translation sees it), one or two sentences before and after (core.explain.knockout_effect), and the first
sentences of a corpus before and after (core.explain.corpus_effect), within the request's budget. No Gradio here.

A part is named by its key (core.explain.CLAIMS': "positions", "scale", "residual", ...) and, for those that sit
somewhere, a `where` in core's spelling, counted from 0: "decoder.2.cross" (a sub-layer), "encoder.1" (a layer),
"cross.2" or "cross.2.1" (a layer's heads, or one), "1" (a source token). Every refusal is an
``explanations.Refused`` naming what was wrong.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable

from core.bundle import ModelBundle
from core.explain.knockout import CLAIMS, SUBLAYER_WORDS, SUBLAYERS, Knockout
from core.explain.knockout_effect import CorpusEffect, Effect, corpus_effect, knockout_effect
from core.inference.options import DecodeOptions
from core.model.config import ModelConfig

from ..server import slots
from ..server.limits import sentence_seconds
from ..server.registry import UNAVAILABLE, ModelRegistry
from .comparison import PROGRESS_BATCH, affordable_pairs, corpus_pairs, first_pairs
from .explanations import Refused, finite, floats, source_text

PARTS = tuple(CLAIMS)
PART_NAMES = {"positions": "positional encodings", "scale": "the 1/√d_k scale", "residual": "a residual connection",
              "layernorm": "a LayerNorm", "layer": "a whole layer", "heads": "heads",
              "causal_mask": "the look-ahead mask", "hide_source_token": "a source token, hidden from cross-attention"}
# The tab's first view (issue 62): who chases whom, which only word order says.
FIRST_PAIR = ("Zwei Hunde jagen eine Katze.", "Eine Katze jagt zwei Hunde.")
GREEDY = DecodeOptions(method="greedy")
HEAD_STACK_WORDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
                    "cross": "cross-attention"}


# ----- a part and where it sits -------------------------------------------------------------------
def where_choices(part: str, config: ModelConfig, source_tokens: list[str]) -> list[tuple[str, str]]:
    """(label, where) for every place the part can be knocked out of this model, layers counted from 1 in the
    labels; [] for a part that sits nowhere in particular (positions, the scale, the mask)."""
    layers = {"encoder": config.encoder_layers, "decoder": config.decoder_layers, "cross": config.decoder_layers}
    if part in ("residual", "layernorm"):
        return [(f"{stack} layer {i + 1}: {SUBLAYER_WORDS[sub]}", f"{stack}.{i}.{sub}")
                for stack in ("encoder", "decoder") for i in range(layers[stack]) for sub in SUBLAYERS[stack]]
    if part == "layer":
        return [(f"{stack} layer {i + 1}", f"{stack}.{i}") for stack in ("encoder", "decoder")
                for i in range(layers[stack])]
    if part == "heads":
        return [choice for stack in HEAD_STACK_WORDS for i in range(layers[stack])
                for choice in [(f"{HEAD_STACK_WORDS[stack]} layer {i + 1}: all {config.n_heads} heads", f"{stack}.{i}")]
                + [(f"{HEAD_STACK_WORDS[stack]} layer {i + 1}: head {h + 1}", f"{stack}.{i}.{h}")
                   for h in range(config.n_heads)]]
    if part == "hide_source_token":
        return [(f"token {i + 1}: {token}", str(i)) for i, token in enumerate(source_tokens)]
    return []


def default_where(part: str, config: ModelConfig, source_tokens: list[str]) -> str | None:
    """Where a part is knocked out first: a place whose loss shows on the shipped model (measured:
    bench/knockout.py), and the second source token (a word, in "Zwei Hunde ...")."""
    last = config.decoder_layers - 1
    return {"residual": f"decoder.{last}.cross", "layernorm": "encoder.0.ffn", "layer": "decoder.0",
            "heads": f"cross.{last}", "hide_source_token": "1" if len(source_tokens) > 2 else "0"}.get(part)


def knockout_of(part: object, where: object, config: ModelConfig) -> Knockout:
    """The Knockout a part and its place name; Refused names a part, a place or a layer this model lacks."""
    if part not in PARTS:
        raise Refused(f"unknown part {str(part)[:40]!r}; the parts are {', '.join(PARTS)}")
    where = "" if where is None else str(where).strip()
    try:
        if part in ("positions", "scale", "causal_mask"):
            knockout = Knockout(**{part: False})
        elif part == "hide_source_token":
            if not where.isdecimal():
                raise ValueError(f"where must be a source token's index, from 0; got {where[:20]!r}")
            knockout = Knockout(hide_source_token=int(where))
        elif part == "heads":
            knockout = Knockout(heads=_heads(where, config))
        else:
            knockout = Knockout(**{part: where})
        knockout.check(config)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    return knockout


def _heads(where: str, config: ModelConfig) -> list[tuple[str, int, int]]:
    """"cross.2": every head of that layer; "cross.2.1": one head."""
    pieces = where.split(".")
    if len(pieces) not in (2, 3) or pieces[0] not in HEAD_STACK_WORDS or not all(p.isdecimal() for p in pieces[1:]):
        raise ValueError(f"heads are written like 'cross.2' (a layer's heads) or 'cross.2.1' (one head), stack one of "
                         f"{', '.join(HEAD_STACK_WORDS)}, from 0; got {where[:40]!r}")
    heads = [int(pieces[2])] if len(pieces) == 3 else range(config.n_heads)
    return [(pieces[0], int(pieces[1]), h) for h in heads]


# ----- one or two sentences -------------------------------------------------------------------------
def reversed_words(text: str) -> str:
    """text's words in reverse order: with a tokenizer that reads each word apart (Metaspace BPE, a word
    vocabulary), the same tokens in another order."""
    return " ".join(reversed(text.split()))


@dataclass
class KnockoutView:
    """What the tab shows: each sentence before and after (A, then B if given, then for positions A's words
    reversed: section 3.5's test), the model, and the notices."""

    model: str
    knockout: Knockout
    effects: list[Effect]
    names: list[str]  # "A", "B", "A's words reversed"
    notices: list[str]

    @property
    def reversal_holds(self) -> bool | None:
        """Positions knocked out, A's words reversed: whether the reversal reads the same tokens and the knocked
        out model translates both alike (None: not asked)."""
        if "A's words reversed" not in self.names:
            return None
        a, r = self.effects[0], self.effects[self.names.index("A's words reversed")]
        return Counter(a.source_tokens) == Counter(r.source_tokens) and a.after.text == r.after.text


def private_twin(registry: ModelRegistry, name: str | None) -> tuple[ModelBundle, Any]:
    """The model picked as name, on the registry's private copy (the one head ablation uses), and its lock."""
    try:
        bundle = registry.get(name)
        model, lock = registry.ablation_model(name, bundle)
    except UNAVAILABLE as exc:
        raise Refused(str(exc)) from None
    return replace(bundle, model=model), lock  # the same tokenizers (both, with separate vocabularies)


def knockout_view(registry: ModelRegistry, name: str | None, first: object, second: object, part: object,
                  where: object) -> KnockoutView:
    """Sentence first (and second, if not blank) before and after the part knocked out, greedy; with positions,
    first's words reversed too."""
    source, notices = source_text(first)
    other, other_notices = ("", []) if not str(second or "").strip() else source_text(second)
    twin, lock = private_twin(registry, name)
    knockout = knockout_of(part, where, twin.model.config)
    sentences = [("A", source)] + ([("B", other)] if other else [])
    if knockout.parts == ["positions"]:
        sentences.append(("A's words reversed", reversed_words(source)))
    config = twin.model.config
    estimate = sum(_sentence_seconds(twin, text, config) for _, text in sentences)
    with slots.heavy(estimate), lock:
        try:
            effects = [knockout_effect(twin, text, knockout, GREEDY) for _, text in sentences]
        except ValueError as exc:
            raise Refused(str(exc)) from None
    said = [f"A: {n}" for n in notices] + [f"B: {n}" for n in other_notices]
    said += [f"{w}: {n}" for (w, _), e in zip(sentences, effects) for n in e.notices]
    return KnockoutView(str(name), knockout, effects, [w for w, _ in sentences], said)


def _sentence_seconds(bundle: ModelBundle, text: str, config: ModelConfig) -> float:
    """A sentence's knock-out: two greedy translations (a knocked-out model may run to the maximum length, source +
    50) and the teacher-forced passes beside them."""
    tokens = min(len(bundle.tokenizer.encode(text)) + 1, config.max_len)
    return 2 * sentence_seconds(config, tokens, min(tokens + 50, config.max_len), 1)


# ----- a corpus --------------------------------------------------------------------------------------
def corpus_view(registry: ModelRegistry, name: str | None, part: object, where: object, corpus: str, split: str,
                n: object, on_batch: Callable[[int], None] | None = None
                ) -> tuple[CorpusEffect, str, list[str]]:
    """The first n pairs of a corpus split (as many as the request's budget affords), greedy, before and after:
    the effect, the pairs in words, and the notices. on_batch(k) after each batch of k sentences, 2n in all."""
    twin, lock = private_twin(registry, name)
    knockout = knockout_of(part, where, twin.model.config)
    asked, described, _ = corpus_pairs(corpus, split, n, twin)
    pairs, seconds, notices = affordable_pairs([twin], asked, passes=2, how="each translated intact and knocked out")
    described = first_pairs(described, len(asked), len(pairs))
    with slots.heavy(seconds) as work, lock:
        def progress(k: int) -> None:
            work.check()
            if on_batch is not None:
                on_batch(k)
        try:
            effect = corpus_effect(twin, pairs, knockout, replace(GREEDY, batch_size=PROGRESS_BATCH), progress)
        except ValueError as exc:
            raise Refused(str(exc)) from None
    return effect, described, notices


# ----- JSON (/knock_out) ---------------------------------------------------------------------------------
def effect_json(name: str, e: Effect) -> dict[str, Any]:
    return {"sentence": name, "source_tokens": e.source_tokens, "before": e.before.text, "after": e.after.text,
            "changed": e.changed, "tokens": e.tokens, "probabilities_before": floats(e.probabilities_before),
            "probabilities_after": floats(e.probabilities_after),
            "attention": {"stack": e.neighbour.stack, "layer": e.neighbour.layer, "why": e.neighbour.why,
                          "query_tokens": e.query_tokens, "key_tokens": e.key_tokens,
                          "before": floats(e.attention_before.mean(axis=0)),
                          "after": floats(e.attention_after.mean(axis=0)),
                          "shift": finite(e.attention_shift), "entropy_before": finite(e.entropy[0]),
                          "entropy_after": finite(e.entropy[1])}}


def knockout_json(view: KnockoutView) -> dict[str, Any]:
    """The view's numbers; attention maps are their heads' mean, rows and columns named by the tokens."""
    part = view.knockout.parts[0]
    return {"model": view.model, "part": part, "knocked_out": view.knockout.words,
            "claim": {"section": CLAIMS[part].section, "claim": CLAIMS[part].claim},
            "sentences": [effect_json(n, e) for n, e in zip(view.names, view.effects)],
            "reversal_holds": view.reversal_holds, "notices": view.notices}


def corpus_json(effect: CorpusEffect, described: str) -> dict[str, Any]:
    return {"on": described, "before": {"bleu": effect.before.bleu, "chrf": effect.before.chrf},
            "after": {"bleu": effect.after.bleu, "chrf": effect.after.chrf}, "sentences": effect.before.n,
            "changed": effect.changed, "bleu_signature": effect.before.bleu_signature,
            "examples": [{"source": s, "before": b, "after": a} for s, b, a in effect.examples]}
