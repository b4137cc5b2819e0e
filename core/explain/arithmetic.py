"""Section 3.2's arithmetic for one query, with the model's own numbers: what a head of a multi-head
attention sub-layer computes for one position of one sentence pair (teacher forced, eval mode).

    head_i = Attention(x W_i^Q, K W_i^K, V W_i^V),  Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V   (eq. 1)
    MultiHead = Concat(head_1, ..., head_h) W^O                                                      (3.2.2)
    output = LayerNorm(x + MultiHead)   (3.1; pre-norm: x + MultiHead(LayerNorm(x)))

The encoder's self-attention and the decoder's masked self-attention (3.2.3: a query may not attend
to later positions, its scores there set to -inf) read keys and values from the sub-layer's own
input; the decoder's cross-attention reads them from the encoder's output. The inputs are taken
from the running model with forward hooks, and the arithmetic is redone here step by step from the
sub-layer's weights, the softmax weights and the head's output by the model's own eq. 1
(core/model/scaled_dot_product.py); tests check the weights against core.explain.hooks.attention_maps,
each step against the one before, and the output against what the sub-layer passed on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..inference.steps import inference
from ..inference.scoring import Pair, prepare_pair
from ..inference.translation import target_tokenizer
from ..model.attention import MultiHeadAttention
from ..model.layers import Residual
from ..model import scaled_dot_product
from ..model.transformer import Transformer

STACKS = ("encoder", "decoder", "cross")


@dataclass
class AttentionArithmetic:
    """One query of one head: every number of eq. 1 and what follows it, float32 arrays."""

    stack: str
    layer: int
    head: int
    query: int
    query_tokens: list[str]    # the sub-layer's positions: source tokens (encoder), or <bos> + target tokens
    key_tokens: list[str]      # what the query attends over: source tokens (encoder, cross) or query_tokens
    stream: np.ndarray         # (d_model,) the residual stream entering the sub-layer at the query
    x: np.ndarray              # (d_model,) what attention reads there: stream, or LayerNorm(stream) if norm_first
    q: np.ndarray              # (d_k,) x W_i^Q (+ bias): the head's query
    keys: np.ndarray           # (keys, d_k) k_j W_i^K (+ bias), k_j the sub-layer input (or encoder output) at j
    values: np.ndarray         # (keys, d_v) likewise with W_i^V
    dots: np.ndarray           # (keys,) q · k_j
    scaled: np.ndarray         # (keys,) q · k_j / sqrt(d_k)
    mask: np.ndarray           # (keys,) 0 where the query may attend, -inf where it may not (3.2.3)
    weights: np.ndarray        # (keys,) softmax(scaled + mask): core.explain.hooks.attention_maps' row
    head_output: np.ndarray    # (d_v,) sum_j weights_j v_j
    concat: np.ndarray         # (d_model,) Concat(head_1, ..., head_h) at the query
    projected: np.ndarray      # (d_model,) concat W^O (+ bias): the sub-layer's output
    residual: np.ndarray       # (d_model,) stream + projected (dropout is off in eval mode)
    output: np.ndarray         # (d_model,) LayerNorm(residual), or residual if norm_first: the stream leaving
    notices: list[str]         # what was done to the input (truncation, <unk>), in words

    @property
    def scale(self) -> float:
        """sqrt(d_k), what the dot products are divided by."""
        return math.sqrt(self.q.shape[0])


def attention_arithmetic(bundle: Any, source: str, target: str | Sequence[int], stack: str, layer: int, head: int,
                         query: int) -> AttentionArithmetic:
    """The arithmetic of `stack` ("encoder", "decoder" or "cross") layer `layer`, head `head`, for query
    position `query` (indices from 0): query positions are the source tokens with <eos> (encoder) or
    <bos> and the target's tokens (decoder, cross; the decoder's input, so <eos> is not among them).
    target: text, or token ids (Translation.ids)."""
    model = bundle.model
    pair = prepare_pair(bundle, source, target)
    if pair.empty:
        raise ValueError(f"the source {source[:40]!r} is empty: there is nothing to attend to")
    query_tokens = pair.source_tokens if stack == "encoder" else target_tokenizer(bundle).tokens(pair.tgt_in)
    _check(model, stack, layer, head, query, query_tokens)
    residual_module, attention = _sub_layer(model, stack, layer)
    stream, memory = _capture(model, pair, residual_module)
    norm_first = model.config.norm_first
    with torch.no_grad():
        x = residual_module.norm(stream) if norm_first else stream  # (T, d_model)
        numbers = _head_arithmetic(attention, x, memory if stack == "cross" else x, query, causal=stack == "decoder")
        projected = attention.out_proj(numbers["concat"])
        residual = stream[query] + projected
        output = residual if norm_first else residual_module.norm(residual)
    vectors = {"stream": stream[query], "x": x[query], "projected": projected, "residual": residual, "output": output}
    shared = {"mask": numbers.pop("mask"), "concat": numbers.pop("concat")}
    chosen = {name: value[head] for name, value in numbers.items()}  # per head: (h, ...)
    arrays = {name: value.float().cpu().numpy() for name, value in {**chosen, **shared, **vectors}.items()}
    key_tokens = query_tokens if stack == "decoder" else pair.source_tokens
    return AttentionArithmetic(stack, layer, head, query, query_tokens, key_tokens, notices=pair.notices, **arrays)


def _check(model: Transformer, stack: str, layer: int, head: int, query: int, query_tokens: list[str]) -> None:
    if stack not in STACKS:
        raise ValueError(f"unknown attention stack {stack!r}; allowed: {', '.join(STACKS)}")
    layers = model.config.encoder_layers if stack == "encoder" else model.config.decoder_layers
    limits = (("layer", layer, layers, f"the {stack} has {layers} layers"),
              ("head", head, model.config.n_heads, f"each layer has {model.config.n_heads} heads"),
              ("query", query, len(query_tokens), f"the {stack} attention has {len(query_tokens)} query positions"))
    for name, value, count, why in limits:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
            raise ValueError(f"{name} {value!r} is out of range 0..{count - 1}: {why}")


def _sub_layer(model: Transformer, stack: str, layer: int) -> tuple[Residual, MultiHeadAttention]:
    if stack == "encoder":
        return model.encoder_layers[layer].res_attn, model.encoder_layers[layer].self_attn
    decoder_layer = model.decoder_layers[layer]
    if stack == "decoder":
        return decoder_layer.res_self, decoder_layer.self_attn
    return decoder_layer.res_cross, decoder_layer.cross_attn


def _capture(model: Transformer, pair: Pair, residual: Residual) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the pair once; (the stream entering the sub-layer, the encoder's output), each (positions,
    d_model). One sentence is not padded, so the model's tensors are (1, positions, d_model)."""
    seen: dict[str, torch.Tensor] = {}
    hooks = [residual.register_forward_hook(lambda m, args, out: seen.update(stream=args[0])),
             model.encoder_norm.register_forward_hook(lambda m, args, out: seen.update(memory=out))]
    device = model.src_embed.weight.device
    try:
        with inference(model):
            model(torch.tensor([pair.src], device=device), torch.tensor([pair.tgt_in], device=device))
    finally:
        for hook in hooks:
            hook.remove()
    return seen["stream"][0], seen["memory"][0]


def _head_arithmetic(attention: MultiHeadAttention, x: torch.Tensor, source: torch.Tensor, query: int,
                     causal: bool) -> dict[str, torch.Tensor]:
    """Eq. 1 for every head at one query, spelled out: x (T, d_model) the sub-layer's input, source
    (keys, d_model) what keys and values are projected from. Per-head arrays are (h, ...)."""
    h, d_k, d_v = attention.n_heads, attention.d_k, attention.d_head  # Table 3 (B) gives d_k apart from d_v
    if attention.cross:
        w_q, b_q = attention.q_proj.weight, attention.q_proj.bias
        (w_k, w_v), (b_k, b_v) = _projections(attention.kv_proj, attention.widths[1:])
    else:
        (w_q, w_k, w_v), (b_q, b_k, b_v) = _projections(attention.qkv_proj, attention.widths)
    q = F.linear(x[query], w_q, b_q).view(h, d_k)
    keys = F.linear(source, w_k, b_k).view(-1, h, d_k).transpose(0, 1)  # (h, keys, d_k)
    values = F.linear(source, w_v, b_v).view(-1, h, d_v).transpose(0, 1)  # (h, keys, d_v)
    dots = (keys @ q[:, :, None]).squeeze(2)
    scaled = dots / math.sqrt(d_k)
    allowed = torch.ones(keys.size(1), dtype=torch.bool, device=x.device)
    if causal:  # 3.2.3: "masking out (setting to -inf) all values ... which correspond to illegal connections"
        allowed[query + 1:] = False
    mask = torch.zeros(keys.size(1), device=x.device).masked_fill(~allowed, float("-inf"))
    # softmax(scaled + mask) and the weighted values as the model computes them, for one sentence and one query.
    head_output, weights = scaled_dot_product.attention(q[None, :, None], keys[None], values[None], allowed,
                                                        need_weights=True)
    head_output, weights = head_output[0, :, 0], weights[0, :, 0]  # (h, d_v), (h, keys)
    on = 1.0 if attention.head_mask is None else attention.head_mask[:, None]  # heads switched off: zero
    return {"q": q, "keys": keys, "values": values, "dots": dots, "scaled": scaled, "mask": mask,
            "weights": weights, "head_output": head_output, "concat": (head_output * on).reshape(-1)}


def _projections(linear: torch.nn.Linear, widths: tuple[int, ...]) -> tuple[tuple, tuple]:
    """The weights and biases of the projections a fused linear holds side by side (widths: each one's rows)."""
    biases = linear.bias.split(widths) if linear.bias is not None else (None,) * len(widths)
    return linear.weight.split(widths), biases
