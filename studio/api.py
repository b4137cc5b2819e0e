"""The explaining tabs' numbers for scripts (gradio_client, Gradio's REST API): /score,
/attention_arithmetic and /saliency, JSON-able dicts checked as the page checks its input
(studio.limits.clean_input on text, ranges on indices). docs/api-explain.md shows each in use.

Indices count from 0, as core does (the tabs' "layer 1, head 1" is layer 0, head 0 here).
"""
from __future__ import annotations

import functools
import html
from typing import Any, Callable

import gradio as gr

from core.bundle import ModelBundle

from . import explain
from .limits import HEAVY
from .registry import UNAVAILABLE, ModelRegistry
from .text import guard


def _checked(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A refusal becomes the client's error (gr.Error) with its reason; anything else, guard's message."""
    @functools.wraps(fn)  # its signature and type hints: Gradio reads the endpoint's parameters from them
    def call(*args, **kwargs) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except explain.Refused as why:
            raise gr.Error(html.escape(str(why), quote=False)) from None
    return guard(call)


def _bundle(registry: ModelRegistry, model: str) -> ModelBundle:
    try:
        return registry.get(model)
    except UNAVAILABLE as exc:
        raise explain.Refused(str(exc)) from None


def _pair(registry: ModelRegistry, model: str, source: str, target: str) -> tuple[ModelBundle, dict[str, Any]]:
    """The model, and the pair as read (cleaned text and what cleaning did) for the answer's head."""
    bundle = _bundle(registry, model)
    source, source_notices = explain.source_text(source)
    target, target_notices = explain.target_text(target)
    return bundle, {"model": model, "source": source, "target": target,
                    "notices": [f"source: {n}" for n in source_notices] + [f"target: {n}" for n in target_notices]}


def _answer(head: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {**head, **body, "notices": head["notices"] + body["notices"]}


def register(registry: ModelRegistry) -> None:
    """Add the three endpoints to the Blocks being built; they share the decoding slots (limits.HEAVY)."""

    def score(model: str, source: str, target: str) -> dict:
        """The model's log-probability of target as a translation of source, token by token (teacher forcing):
        tokens (<eos> last), ids, logprobs, probabilities, ranks (1: the model's first choice), the top 5
        alternatives per token, and totals (logprob, mean, perplexity, mean_rank)."""
        bundle, head = _pair(registry, model, source, target)
        return _answer(head, explain.score_json(explain.score(bundle, head["source"], [head["target"]])[0]))

    def attention_arithmetic(model: str, source: str, target: str, stack: str = "cross", layer: int = 0,
                             head: int = 0, query: int = 0) -> dict:
        """Section 3.2's arithmetic for one query of one head, every number: stack "encoder", "decoder" or
        "cross"; layer, head and query counted from 0 (query: a position among query_tokens)."""
        bundle, pair = _pair(registry, model, source, target)
        a = explain.arithmetic(bundle, pair["source"], pair["target"], stack, layer, head, query)
        return _answer(pair, explain.arithmetic_json(a))

    def saliency(model: str, source: str, target: str, method: str = "grad_x_input", steps: int = 32) -> dict:
        """Attribution (method "grad_x_input" or "integrated_gradients", steps for the latter) beside the
        cross-attention averaged over layers and heads, their agreement and the word alignments."""
        bundle, head = _pair(registry, model, source, target)
        return _answer(head, explain.saliency_json(explain.saliency(bundle, head["source"], head["target"], method,
                                                                    steps)))

    for fn in (score, attention_arithmetic, saliency):
        gr.api(_checked(fn), api_name=fn.__name__, **HEAVY)
