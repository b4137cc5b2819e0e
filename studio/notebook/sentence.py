"""The views of one sentence, each a line in a notebook: its translation (6.1), every attention map (3.2) and
bertviz's views of them, one query's attention arithmetic (3.2.1), the beam search tree (6.1) and saliency.

Each takes any model (studio.notebook.models) and a source sentence; a target (text, or token ids) is the
pair's other side, by default the model's own translation (beam 4, α 0.6: the studio's). Layers, heads and
queries count from 0, as core does; the figures name them from 1, as the paper and the studio do.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

import core
from core.explain.hooks import attention_maps
from core.inference.options import DecodeOptions
from core.inference.scoring import Pair, prepare_pair
from core.inference.stepwise_beam import BeamStepper
from core.training.loss import smoothed_target_distribution

from .. import plots
from ..numbers import beam_tree as tree, explanations
from ..plots import bertviz_offline
from ..text import md
from .models import Model, bundle_of
from .view import Page, View, notes

Target = str | Sequence[int] | None
STACKS = explanations.STACK_NAMES  # "encoder", "decoder", "cross" -> their names in words
AXES = {"encoder": ("query: source token", "key: source token"),
        "decoder": ("query: decoder input", "key: decoder input"),
        "cross": ("query: target token<br>being predicted", "key: source token")}
ARITHMETIC_PARTS = ("keys", "values", "output")
SALIENCY_PARTS = ("maps", "agreement")


def _ceiling(bundle: core.ModelBundle) -> float | None:
    """The probability label smoothing (5.4) trained the model to give the right word, 1 - eps + eps/V (the
    Translate tab's dashed line); None when its training record names no smoothing."""
    train = bundle.info.get("train")
    eps = train.get("label_smoothing") if isinstance(train, dict) else None
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        return None
    return float(smoothed_target_distribution(0, bundle.target_tokenizer.vocab_size, eps).max())


def translation(model: Model, source: str, *, target_lang: str | None = None, **decoding: Any) -> View:
    """The Translate tab: the translation, each output token's probability (the figure) and the n-best list.
    decoding: DecodeOptions' fields (method="greedy", beam_size=8, alpha=0.6, ...; n_best: 4 for beam search)."""
    bundle = bundle_of(model)
    beam = decoding.get("method", "beam") == "beam"
    options = DecodeOptions(**{"n_best": min(4, decoding.get("beam_size", 4)) if beam else 1, **decoding})
    t = core.translate_detailed(bundle, [source], options, target_lang=target_lang)[0]
    tokens = t.tokens + ["<eos>"] if t.token_logprobs else []
    n_best = [{"rank": i + 1, "score": score, "translation": text} for i, (text, score) in enumerate(t.n_best)]
    numbers = {"translation": t.text, "tokens": tokens, "logprobs": t.token_logprobs,
               "probabilities": np.exp(t.token_logprobs).tolist(), "score": t.score, "n_best": n_best,
               "notices": t.notices}
    best = "\n".join(f"{h['rank']}. {md(h['translation'])} ({h['score']:.4f})" for h in n_best[1:])
    note = f"**{md(t.text)}**" + (f"\n\nn-best:\n\n{best}" if best else "") + (f"\n\n{notes(t.notices)}" if t.notices
                                                                           else "")
    figure = plots.token_probabilities(tokens, t.token_logprobs, _ceiling(bundle))
    return View(figure, numbers, note, "token probabilities")


def sentence_pair(model: Model, source: str, target: Target = None) -> Pair:
    """The pair as teacher forcing reads it; target None: the model's own translation."""
    bundle = bundle_of(model)
    if target is None:
        target = core.translate_detailed(bundle, [source], DecodeOptions())[0].ids
    pair = prepare_pair(bundle, source, target)
    if pair.empty:
        raise ValueError("the source sentence has no tokens: give a sentence to look at")
    return pair


def _axes(pair: Pair, stack: str) -> tuple[list[str], list[str]]:
    """(query tokens, key tokens) of a stack: the decoder reads <bos> and the target, and predicts the target."""
    decoder = ["<bos>", *pair.tokens[:-1]]
    return {"encoder": (pair.source_tokens, pair.source_tokens), "decoder": (decoder, decoder),
            "cross": (pair.tokens, pair.source_tokens)}[stack]


def _index(value: int | None, count: int, what: str) -> int | None:
    if value is not None and not (isinstance(value, int) and 0 <= value < count):
        raise ValueError(f"{what} {value!r} is out of range: there are {count} (0..{count - 1})")
    return value


def _stack(stack: str) -> str:
    if stack not in STACKS:
        raise ValueError(f"unknown attention stack {stack!r}; allowed: {', '.join(STACKS)}")
    return stack


def attention(model: Model, source: str, *, stack: str = "cross", layer: int | None = None,
              head: int | None = None, target: Target = None) -> View:
    """The Attention tab: every layer × head of one stack ("encoder", "decoder" or "cross"), or with layer given
    one map large (head None: the mean of the layer's heads). numbers: the maps drawn, [layer][head][query][key]."""
    bundle, stack = bundle_of(model), _stack(stack)
    pair = sentence_pair(bundle, source, target)
    maps = attention_maps(bundle.model, pair.src, pair.tgt_in)[stack].double().numpy()  # (L, h, q, k)
    rows, cols = _axes(pair, stack)
    n_layers, n_heads = maps.shape[:2]
    name, what = plots.label(bundle.name), STACKS[stack]
    if _index(layer, n_layers, "layer") is None:
        figure = plots.attention_grid(maps, rows, cols, f"{name} · {what}<br>every layer (rows) × head (columns)",
                                      [f"H{h + 1}" for h in range(n_heads)], *AXES[stack])
    else:
        weights = maps[layer].mean(axis=0) if _index(head, n_heads, "head") is None else maps[layer, head]
        which = f"layer {layer + 1}, " + (f"mean of {n_heads} heads" if head is None else f"head {head + 1}")
        figure = plots.attention_head(weights, rows, cols, f"{name} · {what}, {which}", *AXES[stack])
    numbers = {"translation": bundle.target_tokenizer.decode(pair.tgt[:-1]), "stack": stack,
               "query_tokens": rows, "key_tokens": cols, "weights": np.round(maps, 4).tolist(),
               "notices": pair.notices}
    return View(figure, numbers, notes(pair.notices), f"{stack} attention")


def _bertviz(model: Model, source: str, stack: str, target: Target, view: str) -> Page:
    bundle, stack = bundle_of(model), _stack(stack)
    pair = sentence_pair(bundle, source, target)
    maps = attention_maps(bundle.model, pair.src, pair.tgt_in)
    tokens = [plots.shown(t) for t in pair.source_tokens], [plots.shown(t) for t in ["<bos>", *pair.tokens[:-1]]]
    layers = {name: [m[None] for m in torch.unbind(weights)] for name, weights in maps.items()}
    draw = bertviz_offline.head_view if view == "head" else bertviz_offline.model_view
    return Page(draw(layers, *tokens, stack), {"source_tokens": tokens[0], "decoder_tokens": tokens[1]})


def head_view(model: Model, source: str, *, stack: str = "cross", target: Target = None) -> Page:
    """bertviz's head view of every stack, offline, open on stack."""
    return _bertviz(model, source, stack, target, "head")


def model_view(model: Model, source: str, *, stack: str = "cross", target: Target = None) -> Page:
    """bertviz's model view (every layer and head as thumbnails), offline, open on stack."""
    return _bertviz(model, source, stack, target, "model")


def arithmetic(model: Model, source: str, *, stack: str = "cross", layer: int = 0, head: int = 0, query: int = 1,
               part: str = "keys", target: Target = None) -> View:
    """The Attention arithmetic tab: one query of one head through section 3.2 with the model's own numbers.
    part: "keys" (steps 1-2, q and the keys), "values" (step 7, the weighted values) or "output" (steps 8-10,
    the heads, W^O, the residual and LayerNorm). numbers: every number of it (/attention_arithmetic's JSON:
    q·k_j as "dots", ÷√d_k as "scaled", the mask, the softmax "weights", ...)."""
    if part not in ARITHMETIC_PARTS:
        raise ValueError(f"unknown part {part!r}; allowed: {', '.join(ARITHMETIC_PARTS)}")
    bundle = bundle_of(model)
    pair = sentence_pair(bundle, source, target)
    a = explanations.arithmetic(bundle, source, pair.tgt[:-1], _stack(stack), layer, head, query)
    config = bundle.model.config
    steps = {"keys": "Steps 1-2: the query and the keys", "values": "Step 7: the weighted sum of the values",
             "output": "Steps 8-10: heads, W^O, residual, LayerNorm"}
    title = plots.arithmetic_title(bundle.name, STACKS[stack], a, steps[part])
    figure = {"keys": lambda: plots.query_and_keys(a, title), "values": lambda: plots.weighted_values(a, title),
              "output": lambda: plots.concat_to_output(a, config.n_heads, config.norm_first, title)}[part]()
    return View(figure, explanations.arithmetic_json(a), notes(a.notices), f"attention arithmetic, {part}")


def beam_tree(model: Model, source: str, *, beam_size: int = 4, alpha: float = 0.6, steps: int | None = None
              ) -> View:
    """The Beam search tab's tree after `steps` steps (None: to the end): every hypothesis considered, kept,
    finished or pruned. numbers: the hypotheses at that step."""
    stepper = BeamStepper(bundle_of(model), source, tree.decode_options(beam_size, alpha, "gnmt", 50))
    views = [stepper.view]
    while not views[-1].done and (steps is None or len(views) <= steps):
        views.append(stepper.step())
    view = views[-1]
    best = tuple(view.finished[0].ids) if view.done and view.finished else None
    figure = plots.beam_tree(tree.tree_nodes(views), view.step, best)
    rows = [dict(zip(("hypothesis", "logprob", "score", "tokens"), row)) for row in tree.table(view)]
    return View(figure, {"step": view.step, "done": view.done, "hypotheses": rows, "notices": stepper.notices},
                md(view.explanation), "beam search tree")


def saliency(model: Model, source: str, *, method: str = "grad_x_input", steps: int = 32, part: str = "maps",
             target: Target = None) -> View:
    """The Saliency tab: which source tokens drove each target token (method "grad_x_input" or
    "integrated_gradients", with steps) beside the averaged cross-attention (part "maps"), or how far the two agree
    per target token (part "agreement"). numbers: /saliency's JSON."""
    if part not in SALIENCY_PARTS:
        raise ValueError(f"unknown part {part!r}; allowed: {', '.join(SALIENCY_PARTS)}")
    bundle = bundle_of(model)
    pair = sentence_pair(bundle, source, target)
    s = explanations.saliency(bundle, source, pair.tgt[:-1], method, steps)
    name, c = plots.label(bundle.name), s.compared
    if part == "maps":
        method_name = explanations.METHOD_NAMES[s.method] + (f", {s.steps} steps" if s.steps > 1 else "")
        figure = plots.saliency_maps(s.attribution, s.attention, s.source_tokens, s.target_tokens, method_name,
                                     f"{name} · which source tokens drove each target token")
    else:
        figure = plots.agreement_bars(c, s.source_tokens, s.target_tokens, f"{name} · does the most-attributed "
                                      f"source token get the most attention? {c.agreed} of {c.compared}")
    note = f"Agreement: the most-attributed source token is the most-attended one for {c.agreed} of {c.compared}."
    return View(figure, explanations.saliency_json(s), "\n\n".join(filter(None, [note, notes(s.notices)])),
                f"saliency, {part}")
