"""Opening a trained Transformer up for the studio's views, without changing what it computes: every
layer's and head's attention weights for one sentence pair, and heads switched off for an ablation. Kept
out of core.model.Transformer, which holds the paper's model alone."""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import torch

from ..model.attention import MultiHeadAttention
from ..model.transformer import Transformer


@torch.no_grad()
def attention_maps(model: Transformer, src: Sequence[int], tgt_in: Sequence[int]) -> dict[str, torch.Tensor]:
    """Every layer's and head's attention probabilities for one teacher-forced sentence pair (ids with eos;
    bos and the target), in eval mode: {"encoder": (L, h, S, S), "decoder": (L, h, T, T), "cross": (L, h, T, S)},
    float32 on the CPU (what the studio draws)."""
    device, was_training = model.generator.weight.device, model.training
    model.eval()
    try:
        _, attention = model(torch.tensor([list(src)], device=device), torch.tensor([list(tgt_in)], device=device),
                             return_attention=True)
    finally:
        model.train(was_training)
    return {stack: torch.cat(layers).float().cpu() for stack, layers in attention.items()}


def attention_modules(model: Transformer) -> dict[str, list[MultiHeadAttention]]:
    """The attention sub-layers by stack: encoder self-attention, decoder self-attention, cross-attention."""
    return {"encoder": [layer.self_attn for layer in model.encoder_layers],
            "decoder": [layer.self_attn for layer in model.decoder_layers],
            "cross": [layer.cross_attn for layer in model.decoder_layers]}


@contextlib.contextmanager
def heads_off(model: Transformer, heads: dict[str, dict[int, list[int]]]) -> Iterator[None]:
    """Switch chosen heads off inside the block, e.g. {"cross": {0: [1, 3]}}: their contribution to
    Concat(head_1..head_h) W^O (section 3.2.2) becomes zero."""
    modules, n_heads = attention_modules(model), model.config.n_heads
    for stack, layers in heads.items():
        if stack not in modules:
            raise ValueError(f"unknown attention stack {stack!r}; allowed: {list(modules)}")
        for layer, off in layers.items():
            if not 0 <= layer < len(modules[stack]):
                raise ValueError(f"{stack} layer {layer} out of range 0..{len(modules[stack]) - 1}")
            bad = [h for h in off if not 0 <= h < n_heads]
            if bad:
                raise ValueError(f"head(s) {bad} out of range 0..{n_heads - 1}")
    try:
        for stack, layers in heads.items():
            for layer, off in layers.items():
                mask = torch.ones(n_heads, device=model.generator.weight.device)
                mask[list(off)] = 0.0
                modules[stack][layer].head_mask = mask
        yield
    finally:
        for stack in modules.values():
            for module in stack:
                module.head_mask = None
