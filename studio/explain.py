"""The numbers behind the What if, Attention arithmetic and Saliency tabs and their API endpoints
(/score, /attention_arithmetic, /saliency; studio/api.py): core's explanations of one sentence pair,
with the input checked as the page checks it, and as plain data (``*_json``: lists, numbers and
strings that JSON carries) for scripts.

Every refusal is a ``Refused`` whose text names what was wrong, for the page's notice line and the
API's error alike.
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
from core.explain.saliency import METHODS
from core.inference.decoding import DecodeOptions
from core.inference.scoring import Score, prepare_pair

from .limits import MAX_IG_STEPS, clean_input

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


def whole_number(value: object, what: str) -> int:
    """value as an int (2.0 from a JSON client is 2); Refused for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise Refused(f"{what} must be a whole number; got {str(value)[:40]!r}")
    return int(value)


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
    agreement: np.ndarray    # per target token, Spearman's rho of |attribution| and attention (NaN: constant row)
    alignment: list[tuple[int, int]]  # (source index, target index): core.alignment's pairs
    notices: list[str]

    @property
    def mean_agreement(self) -> float:
        """The mean of the per-token agreements that exist (NaN when none does)."""
        finite_rows = self.agreement[np.isfinite(self.agreement)]
        return float(finite_rows.mean()) if finite_rows.size else math.nan


def saliency(bundle: ModelBundle, source: str, target: str | Sequence[int], method: str, steps: object
             ) -> Saliency:
    """core.attribution by method beside the layer- and head-averaged cross-attention, their agreement
    and the alignments read from the last layer's cross-attention (fairseq's, core.alignment)."""
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
    # One pass for every map; core.alignment reads the last layer's head mean the same way (a test pins it).
    cross = attention_maps(bundle.model, pair.src, pair.tgt_in)["cross"].double().numpy()  # (L, h, T, S)
    attention = cross.mean(axis=(0, 1))
    last = cross[-1].mean(axis=0)[:-1, :-1]  # <eos> rows and columns out, as fairseq's --print-alignment
    alignment = [(int(s), t) for t, s in enumerate(last.argmax(axis=1))] if last.size else []
    attribution = core.attribution(bundle, source, pair.tgt[:-1], method, steps)
    agreement = core.rank_correlation(np.abs(attribution), attention)
    return Saliency(method, steps if method == "integrated_gradients" else 1, pair.source_tokens, pair.tokens,
                    attribution, attention, agreement, alignment, pair.notices)


def saliency_json(s: Saliency) -> dict[str, Any]:
    return {"method": s.method, "steps": s.steps, "source_tokens": s.source_tokens, "target_tokens": s.target_tokens,
            "attribution": floats(s.attribution), "cross_attention": floats(s.attention),
            "agreement": {"per_token": floats(s.agreement), "mean": finite(s.mean_agreement)},
            "alignment": [list(pair) for pair in s.alignment],
            "alignment_tokens": [[s.source_tokens[i], s.target_tokens[j]] for i, j in s.alignment],
            "notices": s.notices}


# ----- every attention map (/attention) ---------------------------------------------------------------
def attention_json(bundle: ModelBundle, source: str, target: str) -> dict[str, Any]:
    """Every layer's and head's attention weights for the pair, teacher forced, as the Attention tab draws them
    (target empty: the model's own translation, beam 4, as the Translate tab's defaults make it). Each stack's
    maps are [layer][head][query][key], rounded to 4 decimals; its rows and columns are named by the tokens."""
    if not target.strip():
        target = core.translate_detailed(bundle, [source], DecodeOptions(beam_size=4, alpha=0.6))[0].ids
    pair = prepare_pair(bundle, source, target)
    if not pair.src:
        raise Refused("the source sentence has no tokens to attend to")
    maps = attention_maps(bundle.model, pair.src, pair.tgt_in)
    translation = pair.tgt[:-1]
    return {"translation": bundle.target_tokenizer.decode(translation), "source_tokens": pair.source_tokens,
            "decoder_tokens": ["<bos>", *pair.tokens[:-1]], "target_tokens": pair.tokens,
            **{stack: np.round(maps[stack].numpy(), 4).tolist() for stack in ("encoder", "decoder", "cross")},
            "notices": pair.notices}


# ----- JSON --------------------------------------------------------------------------------------
def finite(value: float) -> float | None:
    """value, or None (JSON's null) where it is NaN or infinite: JSON has no such numbers."""
    return float(value) if math.isfinite(value) else None


def floats(values: Any) -> list:
    """An array (any shape) as nested lists of Python floats, NaN as None."""
    array = np.asarray(values, dtype=np.float64)
    return [floats(row) for row in array] if array.ndim > 1 else [finite(v) for v in array.tolist()]
