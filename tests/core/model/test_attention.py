"""Sections 3.2.1-3.2.3: scaled dot-product attention, the kernel (core/model/scaled_dot_product.py) against a
plain softmax(QK^T/sqrt(d_k))V, its two paths and its masks, and multi-head attention around it
(core/model/attention.py)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from tests.helpers.tiny import V, batch, tiny

from core.model import attention as attention_module
from core.model.scaled_dot_product import attention


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


# ----- the kernel: eq. 1 in one function (core/model/scaled_dot_product.py) ---------------------------------------
def plain_attention(q, k, v, mask):
    """softmax(Q K^T / sqrt(d_k)) V written out, masked keys at -inf: the reference."""
    scores = (q @ k.transpose(-2, -1)).double() / q.size(-1) ** 0.5
    probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return probs @ v.double(), probs


def random_qkv(t_query: int, t_key: int, d_k: int = 8, d_v: int = 6, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 2, t_query, d_k, generator=g), torch.randn(3, 2, t_key, d_k, generator=g),
            torch.randn(3, 2, t_key, d_v, generator=g))


def padding_mask(t_query: int, lengths=(7, 4, 1)):
    """(3, 1, 1, 7) True at the real keys of sentences of `lengths`, for t_query queries."""
    return (torch.arange(7) < torch.tensor(lengths)[:, None])[:, None, None, :].expand(-1, 1, t_query, -1)


@pytest.mark.parametrize("t_query", [1, 5])  # one query per row (spelled out on a CPU) and a block (fused)
@pytest.mark.parametrize("need_weights", [False, True])
def test_the_kernel_is_eq_1_with_padding_masked(t_query, need_weights):
    q, k, v = random_qkv(t_query, 7)
    mask = padding_mask(t_query)
    context, probs = attention(q, k, v, mask, need_weights=need_weights)
    want, want_probs = plain_attention(q, k, v, mask)
    torch.testing.assert_close(context.double(), want, atol=1e-5, rtol=0)
    if need_weights:
        torch.testing.assert_close(probs.double(), want_probs, atol=1e-6, rtol=0)
        assert probs.dtype == torch.float32 and bool((probs[2, :, :, 1:] == 0).all())
    else:
        assert probs is None


@pytest.mark.parametrize("need_weights", [False, True])
def test_the_kernel_is_eq_1_with_the_causal_mask(need_weights):
    """causal=True (the fused kernel's is_causal) and the same mask given as a tensor compute the same."""
    q, k, v = random_qkv(6, 6, seed=1)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()[None, None]
    want, _ = plain_attention(q, k, v, causal)
    for flag in (False, True):
        context, _ = attention(q, k, v, causal, causal=flag, need_weights=need_weights)
        torch.testing.assert_close(context.double(), want, atol=1e-5, rtol=0)
    both = causal & padding_mask(6, (6, 4, 2))[..., :6]  # padding and the causal mask together
    context, _ = attention(q, k, v, both, need_weights=need_weights)
    torch.testing.assert_close(context.double(), plain_attention(q, k, v, both)[0], atol=1e-5, rtol=0)


def test_the_kernel_drops_attention_weights_only_when_asked():
    q, k, v = random_qkv(5, 7, seed=2)
    mask = padding_mask(5)
    torch.testing.assert_close(attention(q, k, v, mask, dropout=0.0)[0], attention(q, k, v, mask)[0])
    torch.manual_seed(0)
    dropped, _ = attention(q, k, v, mask, dropout=0.5, need_weights=True)
    assert not torch.allclose(dropped, attention(q, k, v, mask)[0])


def test_a_head_switched_off_is_zero_in_the_concatenation_the_kernel_unchanged():
    """Head ablation is the layer's (core/explain/hooks.py sets head_mask): the heads' contexts from the kernel,
    the switched-off ones zeroed before Concat(head_1, ..., head_h) W^O."""
    model = tiny()
    layer = model.encoder_layers[0].self_attn
    x = torch.randn(2, 5, model.config.d_model)
    q, k, v = (layer._split(t) for t in layer.qkv_proj(x).split(layer.widths, dim=-1))
    context, _ = attention(q, k, v)
    context[:, 1] = 0
    want = layer.out_proj(context.transpose(1, 2).flatten(2))
    layer.head_mask = torch.tensor([1.0, 0.0] + [1.0] * (model.config.n_heads - 2))
    try:
        got, _, _ = layer(x)
    finally:
        layer.head_mask = None
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_every_attention_goes_through_the_kernel(monkeypatch):
    """Training, teacher forcing with and without the weights, and a decoding step all call the one kernel."""
    model = tiny()
    calls = []
    monkeypatch.setattr(attention_module, "attention", lambda *a, **k: calls.append(1) or attention(*a, **k))
    src, tgt = batch([7, 3]), batch([6, 2], seed=1)
    layers = model.config.encoder_layers + 2 * model.config.decoder_layers
    for run in (lambda: model(src, tgt), lambda: model(src, tgt, return_attention=True),
                lambda: model.train()(src, tgt).sum().backward(), lambda: model.eval().hidden_grid(src, tgt)):
        calls.clear()
        run()
        assert len(calls) == layers
    cache = model.start_decoding(src)
    calls.clear()
    model.decode_step(torch.tensor([1, 1]), cache)
    assert len(calls) == 2 * model.config.decoder_layers


# The files of core/ that call a softmax, and of what: eq. 1's is the kernel's alone.
SOFTMAXES = {"model/scaled_dot_product.py": "eq. 1",
             "training/loss.py": "the logits' (label smoothing's gradient)",
             "inference/sampling.py": "the logits' (sampling)",
             "explain/contrast.py": "the logits' (a contrast of two words' probabilities)"}


def calling(name: str) -> set[str]:
    """The files of core/ whose code (not their docstrings or comments) calls a function or method `name`."""
    core = Path(__file__).resolve().parents[3] / "core"
    return {str(path.relative_to(core)) for path in core.rglob("*.py")
            if any(isinstance(node, ast.Call) and name in (getattr(node.func, "attr", ""), getattr(node.func, "id", ""))
                   for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))}


def test_eq_1_is_written_once_in_core():
    assert calling("softmax") == set(SOFTMAXES)
    assert calling("scaled_dot_product_attention") == {"model/scaled_dot_product.py"}
