"""The numbers behind the What if, Attention arithmetic and Saliency tabs and their API endpoints
(/score, /attention_arithmetic, /saliency; studio/server/api.py): core's explanations of one sentence pair,
with the input checked as the page checks it, and as plain data (``*_json``: lists, numbers and
strings that JSON carries) for scripts.

Every refusal is a ``Refused`` whose text names what was wrong, for the page's notice line and the
API's error alike. The work runs in a decoding slot (``slots.heavy``), cut to the request's budget first
(``limits.Budget``: fewer integration steps, fewer attention maps), with a notice saying so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

import core
from core.bundle import ModelBundle
from core.explain.arithmetic import STACKS, AttentionArithmetic
from core.explain.hooks import attention_maps
from core.explain.saliency import METHODS, Agreement, compare
from core.inference.options import DecodeOptions
from core.inference.scoring import Pair, Score, prepare_pair

from ..server import slots
from ..server.limits import (
    MAX_IG_STEPS,
    Budget,
    affordable_steps,
    budget_words,
    clean_input,
    number_words,
    saliency_megabytes,
    saliency_seconds,
)
from ..text import clip

TOP_K = 5  # the alternatives kept per target token (the What if tab shows the first)
METHOD_NAMES = {"grad_x_input": "gradient × input", "integrated_gradients": "integrated gradients"}
STACK_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}


class Refused(ValueError):
    """Input that cannot be explained; its text says what was wrong."""


def source_text(text: object) -> tuple[str, list[str]]:
    """A source sentence as the page takes it (cut, cleaned; notices), refused when empty."""
    text, notices = clean_input(text)
    if not text.strip():
        raise Refused("the source sentence is empty: type one (or translate one on the Translate tab)")
    return text, notices


def target_text(text: object) -> tuple[str, list[str]]:
    """A target as the page takes it (cut, cleaned; notices). Empty is allowed: <eos> alone is scored."""
    return clean_input(text)


LARGEST_INDEX = 2**31  # beyond any layer, head or position: refused without echoing all of its digits


def whole_number(value: object, what: str) -> int:
    """value as an int (2.0 from a JSON client is 2); Refused for anything else, and for numbers beyond
    ±LARGEST_INDEX (said short: 1e+300, not 301 digits)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{what} must be a whole number; got {clip(repr(value), 40)}")
    if abs(value) > LARGEST_INDEX:
        raise Refused(f"{what} {number_words(value)} is out of range")
    return value


# ----- scoring (What if, /score) ----------------------------------------------------------------
def score(bundle: ModelBundle, source: str, targets: Sequence[str | Sequence[int]]) -> list[Score]:
    """core.score of each target as a translation of source, in one call (a batch)."""
    try:
        return core.score(bundle, [source] * len(targets), list(targets), top_k=TOP_K)
    except (TypeError, ValueError) as exc:
        raise Refused(str(exc)) from None


def totals(s: Score) -> dict[str, float | None]:
    """A score's sums: log P(Y | X), the mean per token, the perplexity and the mean rank."""
    return {"logprob": finite(s.sum), "mean": finite(s.mean), "perplexity": finite(s.perplexity),
            "mean_rank": finite(s.mean_rank)}


def score_json(s: Score) -> dict[str, Any]:
    """A Score as JSON: per token its id, log-probability, probability, rank and the top alternatives."""
    return {"source_tokens": s.source_tokens, "tokens": s.tokens, "ids": s.ids,
            "logprobs": floats(s.token_logprobs), "probabilities": floats(np.exp(s.token_logprobs)),
            "ranks": s.ranks,
            "alternatives": [[{"token": t, "probability": p} for t, p in top] for top in s.alternatives],
            "totals": totals(s), "notices": s.notices}


# ----- attention arithmetic (its tab, /attention_arithmetic) --------------------------------------
def arithmetic(bundle: ModelBundle, source: str, target: str | Sequence[int], stack: str, layer: object,
               head: object, query: object) -> AttentionArithmetic:
    """core.attention_arithmetic, indices from 0; Refused names a stack, layer, head or query out of range."""
    if stack not in STACKS:
        raise Refused(f"unknown attention stack {str(stack)[:40]!r}; allowed: {', '.join(STACKS)}")
    indices = [whole_number(v, name) for v, name in ((layer, "layer"), (head, "head"), (query, "query"))]
    try:
        with slots.heavy():
            return core.attention_arithmetic(bundle, source, target, stack, *indices)
    except (TypeError, ValueError) as exc:
        raise Refused(str(exc)) from None


def arithmetic_json(a: AttentionArithmetic) -> dict[str, Any]:
    """Every number of the arithmetic; the mask holds 0.0, or "-inf" where the query may not look."""
    vectors = ("stream", "x", "q", "keys", "values", "dots", "scaled", "weights", "head_output", "concat",
               "projected", "residual", "output")
    return {"stack": a.stack, "layer": a.layer, "head": a.head, "query": a.query,
            "query_token": a.query_tokens[a.query], "query_tokens": a.query_tokens, "key_tokens": a.key_tokens,
            "d_k": int(a.q.shape[0]), "scale": a.scale, **{name: floats(getattr(a, name)) for name in vectors},
            "mask": [0.0 if m == 0 else "-inf" for m in a.mask.tolist()], "notices": a.notices}


# ----- saliency (its tab, /saliency) --------------------------------------------------------------
@dataclass
class Saliency:
    """An attribution map beside the cross-attention it is compared with, both (target tokens with
    <eos>) × (source tokens with <eos>)."""

    method: str
    steps: int
    source_tokens: list[str]
    target_tokens: list[str]
    attribution: np.ndarray  # signed, each row divided by its absolute sum
    attention: np.ndarray    # cross-attention averaged over every decoder layer and head
    compared: Agreement      # core.explain.saliency.compare of the two, over the source tokens that are words
    alignment: list[tuple[int, int]]  # (source index, target index): core.alignment's pairs
    notices: list[str]

    @property
    def agreement(self) -> np.ndarray:
        """Per target token, 1.0 where the most-attributed source token is the most-attended one, 0.0
        where not, NaN where not compared (<eos>)."""
        return self.compared.top

    @property
    def mean_agreement(self) -> float:
        """The fraction of the compared target tokens that agree (NaN when none is compared)."""
        return self.compared.fraction


def saliency(bundle: ModelBundle, source: str, target: str | Sequence[int], method: str, steps: object
             ) -> Saliency:
    """core.attribution by method beside the layer- and head-averaged cross-attention, their agreement
    and the alignments read from the last layer's cross-attention (fairseq's, core.alignment). Integrated
    gradients take the steps the request's budget affords (a notice says when that is fewer than asked)."""
    if method not in METHODS:
        raise Refused(f"unknown attribution method {str(method)[:40]!r}; allowed: {', '.join(METHODS)}")
    steps = whole_number(steps, "steps")
    if not 1 <= steps <= MAX_IG_STEPS:
        raise Refused(f"steps must be from 1 to {MAX_IG_STEPS}; got {steps}")
    try:
        pair = prepare_pair(bundle, source, target)
    except (TypeError, ValueError) as exc:
        raise Refused(str(exc)) from None
    if pair.empty:
        raise Refused("the source has no tokens: there is nothing to attribute")
    steps, cut = affordable(bundle, pair, steps if method == "integrated_gradients" else 1)
    with slots.heavy(saliency_seconds(bundle.model.config, len(pair.src), len(pair.tgt), steps)) as work:
        # One pass for every map; core.alignment reads the last layer's head mean the same way (a test pins it).
        cross = attention_maps(bundle.model, pair.src, pair.tgt_in)["cross"].double().numpy()  # (L, h, T, S)
        attribution = core.attribution(bundle, source, pair.tgt[:-1], method, steps, should_stop=work.should_stop)
    attention = cross.mean(axis=(0, 1))
    last = cross[-1].mean(axis=0)[:-1, :-1]  # <eos> rows and columns out, as fairseq's --print-alignment
    alignment = [(int(s), t) for t, s in enumerate(last.argmax(axis=1))] if last.size else []
    compared = compare(attribution, attention, pair.source_tokens, pair.tokens)
    return Saliency(method, steps, pair.source_tokens, pair.tokens, attribution, attention, compared, alignment,
                    pair.notices + cut)


def affordable(bundle: ModelBundle, pair: Pair, steps: int) -> tuple[int, list[str]]:
    """The integration steps (1: gradient × input) this request's budget affords, and a notice when that is fewer
    than asked; Refused when not even one gradient fits."""
    budget, config = slots.current_budget(), bundle.model.config
    source, target = len(pair.src), len(pair.tgt)
    fits = affordable_steps(budget, config, source, target, steps)
    size = f"this {source} + {target}-token pair"
    if fits == 0:
        raise Refused(f"one gradient of {size} would take ~{saliency_seconds(config, source, target, 1):.0f} "
                      f"CPU-seconds and {saliency_megabytes(config, source, target, 1):.0f} MB; "
                      f"{budget_words(budget)}: explain a shorter sentence")
    if fits == steps:
        return steps, []
    return fits, [f"integrated gradients: {fits} step{'s' * (fits > 1)} used, not the {steps} asked: {steps} on "
                  f"{size} would take ~{saliency_seconds(config, source, target, steps):.0f} CPU-seconds and "
                  f"{saliency_megabytes(config, source, target, steps):.0f} MB, and {budget_words(budget)} (fewer "
                  f"steps: a coarser integral; a shorter sentence affords more)"]


def saliency_json(s: Saliency) -> dict[str, Any]:
    return {"method": s.method, "steps": s.steps, "source_tokens": s.source_tokens, "target_tokens": s.target_tokens,
            "attribution": floats(s.attribution), "cross_attention": floats(s.attention),
            "agreement": saliency_agreement_json(s.compared),
            "alignment": [list(pair) for pair in s.alignment],
            "alignment_tokens": [[s.source_tokens[i], s.target_tokens[j]] for i, j in s.alignment],
            "notices": s.notices}


def saliency_agreement_json(c: Agreement) -> dict[str, Any]:
    """compare's numbers per target token (null where a row is not compared), and the totals."""
    def index(values: np.ndarray) -> list[int | None]:
        return [int(i) if i >= 0 else None for i in values]

    return {"per_token": floats(c.top), "mean": finite(c.fraction), "agreed": c.agreed, "compared": c.compared,
            "top_attributed": index(c.top_attributed), "top_attended": index(c.top_attended),
            "attention_share": floats(c.share), "top_attention_share": floats(c.top_share),
            "spearman": floats(c.rho), "mean_spearman": finite(c.mean_rho), "source_words": c.words}


# ----- every attention map (/attention) ---------------------------------------------------------------
def attention_json(bundle: ModelBundle, source: str, target: str, stack: str = "all", layer: object = None
                   ) -> dict[str, Any]:
    """The attention weights for the pair, teacher forced, as the Attention tab draws them (target empty: the model's
    own translation, beam 4, as the Translate tab's defaults make it): each asked stack's maps (stack "all", or
    "encoder", "decoder", "cross"), [layer][head][query][key] rounded to 4 decimals, its rows and columns named by the
    tokens. Layers not asked for (layer: one index; None: all) are null, and so are those beyond the answer's
    budget (limits.Budget.answer_mb), with a notice naming them."""
    stacks = STACKS if stack == "all" else (stack,)
    if stack != "all" and stack not in STACKS:
        raise Refused(f"unknown attention stack {str(stack)[:40]!r}; allowed: all, {', '.join(STACKS)}")
    index = None if layer is None else whole_number(layer, "layer")
    with slots.heavy():
        if not target.strip():
            target = core.translate_detailed(bundle, [source], DecodeOptions(beam_size=4, alpha=0.6))[0].ids
        pair = prepare_pair(bundle, source, target)
        if not pair.src:
            raise Refused("the source sentence has no tokens to attend to")
        maps = attention_maps(bundle.model, pair.src, pair.tgt_in)
    _check_layer(index, maps, stacks)
    kept, notices = maps_within({name: maps[name] for name in stacks}, index, slots.current_budget())
    return {"translation": bundle.target_tokenizer.decode(pair.tgt[:-1]), "source_tokens": pair.source_tokens,
            "decoder_tokens": ["<bos>", *pair.tokens[:-1]], "target_tokens": pair.tokens, **kept,
            "notices": pair.notices + notices}


def _check_layer(index: int | None, maps: dict[str, Any], stacks: Sequence[str]) -> None:
    for name in stacks:
        layers = len(maps[name])
        if index is not None and not 0 <= index < layers:
            raise Refused(f"layer {index} is out of range: the {STACK_NAMES[name]} has {layers} layers "
                          f"(0..{layers - 1})")


def maps_within(maps: dict[str, Any], index: int | None, budget: Budget) -> tuple[dict[str, list], list[str]]:
    """Each stack's layers as nested lists (4 decimals) while they fit in the budget's answer, in order; a layer not
    asked for (index: the one asked; None: all) or past the budget is None. A notice names the layers left out."""
    room = budget.answer_weights
    kept: dict[str, list] = {name: [] for name in maps}
    left_out: list[str] = []
    for name, layers in maps.items():
        for i, weights in enumerate(layers):
            asked, fits = index in (None, i), weights.numel() <= room
            if asked and fits:
                room -= weights.numel()
            elif asked:
                left_out.append(f"{name} layer {i}")
            kept[name].append(np.round(weights.double().numpy(), 4).tolist() if asked and fits else None)
    notices = [f"left out (null) to keep the answer within {budget.answer_mb:g} MB: {', '.join(left_out)}; ask for "
               f"them with stack and layer, one at a time"] if left_out else []
    return kept, notices


# ----- JSON --------------------------------------------------------------------------------------
def finite(value: float) -> float | None:
    """value, or None (JSON's null) where it is NaN or infinite: JSON has no such numbers."""
    return float(value) if math.isfinite(value) else None


def floats(values: Any) -> list:
    """An array (any shape) as nested lists of Python floats, NaN as None."""
    array = np.asarray(values, dtype=np.float64)
    return [floats(row) for row in array] if array.ndim > 1 else [finite(v) for v in array.tolist()]
