"""Sections 3.2.1-3.2.3: scaled dot-product and multi-head attention, its two paths and its masks
(core/model/attention.py)."""
from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import V, batch, tiny


@pytest.mark.parametrize("norm_first", [False, True])
def test_fast_path_equals_inspect_path(norm_first):
    model = tiny(norm_first=norm_first)
    src, tgt = batch([7, 3, 5]), batch([6, 6, 2], seed=1)
    fast = model(src, tgt)
    inspected, attn = model(src, tgt, return_attention=True)
    torch.testing.assert_close(fast, inspected, atol=1e-5, rtol=0)
    layers, heads = model.config.encoder_layers, model.config.n_heads
    assert [a.shape for a in attn["encoder"]] == [(3, heads, 7, 7)] * layers
    assert [a.shape for a in attn["decoder"]] == [(3, heads, 6, 6)] * model.config.decoder_layers
    assert [a.shape for a in attn["cross"]] == [(3, heads, 6, 7)] * model.config.decoder_layers


def test_future_target_tokens_never_change_earlier_logits():
    model = tiny()
    src, tgt = batch([6]), batch([8], seed=5)
    changed = tgt.clone()
    changed[0, 5:] = (changed[0, 5:] + 7) % (V - 4) + 4
    torch.testing.assert_close(model(src, tgt)[:, :5], model(src, changed)[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(model(src, tgt)[:, 5:], model(src, changed)[:, 5:])


def test_attention_rows_sum_to_one_and_padding_gets_no_weight():
    model = tiny()
    src, tgt = batch([7, 4]), batch([5, 3], seed=6)
    _, attn = model(src, tgt, return_attention=True)
    for stack in ("encoder", "decoder", "cross"):
        for probs in attn[stack]:
            torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))
    for probs in attn["encoder"] + attn["cross"]:
        assert probs[1, :, :, 4:].abs().max() == 0  # sentence 2 has 4 real source tokens
    for probs in attn["decoder"]:
        assert torch.triu(probs, diagonal=1).abs().max() == 0  # causal: no weight on the future


def test_attention_probabilities_stay_fp32_under_bf16_autocast():
    """The inspect path's softmax runs in fp32 under autocast, as the fused kernel's does: a bf16
    softmax rounds each probability to 8 bits, and its rows no longer sum to one."""
    model = tiny()
    src, tgt = batch([7, 4]), batch([5, 3], seed=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, attn = model(src, tgt, return_attention=True)
    for probs in attn["encoder"] + attn["decoder"] + attn["cross"]:
        assert probs.dtype == torch.float32
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-6, rtol=0)
