"""The studio's inspection hooks (core/explain/hooks.py): attention maps and head ablation."""
from __future__ import annotations

import math

import pytest
import torch

from core.explain.hooks import attention_maps, attention_modules, heads_off
from tests.helpers.tiny import batch, tiny


def test_head_ablation_changes_output_and_switches_back():
    model = tiny()
    src, tgt = batch([6]), batch([5], seed=7)
    before = model(src, tgt)
    with heads_off(model, {"cross": {0: [0, 1, 2, 3]}, "encoder": {1: [2]}}):
        ablated, attn = model(src, tgt, return_attention=True)
        assert not torch.allclose(before, ablated)
        torch.testing.assert_close(model(src, tgt), ablated, atol=1e-5, rtol=0)  # both paths honour it
    torch.testing.assert_close(model(src, tgt), before)
    with pytest.raises(ValueError, match="head"):
        with heads_off(model, {"cross": {0: [9]}}):
            pass


def test_head_ablation_masks_exactly_the_heads_named():
    model = tiny()
    with heads_off(model, {"cross": {0: [0, 1, 2, 3]}, "encoder": {1: [2]}}):
        masks = {stack: [None if m.head_mask is None else m.head_mask.tolist() for m in modules]
                 for stack, modules in attention_modules(model).items()}
    assert masks == {"encoder": [None, [1.0, 1.0, 0.0, 1.0]], "decoder": [None, None],
                     "cross": [[0.0, 0.0, 0.0, 0.0], None]}
    assert all(m.head_mask is None for modules in attention_modules(model).values() for m in modules)


def test_attention_maps_come_in_layer_order():
    """Layer 1's encoder self-attention recomputed from its own projections of the embeddings
    (eq. 1, post-norm: the first layer reads the embeddings as they are)."""
    model = tiny()
    src, tgt = batch([6]), batch([5], seed=7)
    _, attention = model(src, tgt, return_attention=True)
    h, d_k = model.config.n_heads, model.config.d_model // model.config.n_heads
    x = model._embed(src, model.src_embed)
    q, k, _ = (t.view(1, -1, h, d_k).transpose(1, 2)
               for t in model.encoder_layers[0].self_attn.qkv_proj(x).split(model.config.d_model, dim=-1))
    expected = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d_k), dim=-1)
    torch.testing.assert_close(attention["encoder"][0], expected, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(attention["encoder"][1], expected, atol=1e-3)


def test_attention_maps_are_the_inspect_paths_for_one_pair_in_eval_mode():
    model = tiny().train()
    src, tgt = batch([6]), batch([4], seed=3)
    maps = attention_maps(model, src[0].tolist(), tgt[0].tolist())
    assert model.training  # its mode is given back
    _, attention = model.eval()(src, tgt, return_attention=True)
    assert {k: tuple(v.shape) for k, v in maps.items()} == {"encoder": (2, 4, 6, 6), "decoder": (2, 4, 4, 4),
                                                           "cross": (2, 4, 4, 6)}
    assert all(torch.equal(maps[k], torch.cat(attention[k])) for k in maps)
