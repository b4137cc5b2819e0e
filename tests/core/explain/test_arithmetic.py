"""Issue 41: section 3.2's arithmetic for one query (core.explain.arithmetic). Its softmax weights are
core.explain.hooks.attention_maps' row, its output is what the sub-layer passed on, and each step follows from
the one before."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core.bundle import ModelBundle
from core.data.tokenizer import Tokenizer
from core.explain.arithmetic import STACKS, attention_arithmetic
from core.explain.hooks import attention_maps, heads_off
from core.inference.scoring import prepare_pair
from core.model.config import ModelConfig
from core.model.transformer import Transformer

PAIR = ("Zwei junge Männer spielen Fußball.", "Two young men are playing soccer.")



def sub_layer_output(bundle, source, target, stack: str, layer: int) -> torch.Tensor:
    """What the real model's sub-layer passed on, (positions, d_model), taken with a hook."""
    model = bundle.model.eval()
    blocks = model.encoder_layers if stack == "encoder" else model.decoder_layers
    residual = {"encoder": "res_attn", "decoder": "res_self", "cross": "res_cross"}[stack]
    seen = {}
    hook = getattr(blocks[layer], residual).register_forward_hook(lambda m, args, out: seen.update(out=out[0]))
    pair = prepare_pair(bundle, source, target)
    try:
        with torch.no_grad():
            model(torch.tensor([pair.src]), torch.tensor([pair.tgt_in]))
    finally:
        hook.remove()
    return seen["out"][0]


@pytest.mark.parametrize("stack", STACKS)
def test_the_weights_are_attention_maps_row_for_every_layer_and_head(numbers, stack):
    source, target = "three hundred twenty - one", "drei hundert ein und zwanzig"
    pair = prepare_pair(numbers, source, target)
    maps = attention_maps(numbers.model, pair.src, pair.tgt_in)[stack]  # (L, h, queries, keys)
    layers, heads, queries, _ = maps.shape
    for layer in range(layers):
        for head in range(heads):
            for query in sorted({0, queries // 2, queries - 1}):
                numbers_ = attention_arithmetic(numbers, source, target, stack, layer, head, query)
                np.testing.assert_allclose(numbers_.weights, maps[layer, head, query].numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("stack", STACKS)
def test_on_the_shipped_model_each_step_follows_and_the_output_is_the_models(shipped, stack):
    pair = prepare_pair(shipped, *PAIR)
    maps = attention_maps(shipped.model, pair.src, pair.tgt_in)[stack]
    d_k = shipped.model.config.d_head
    for layer, head, query in ((0, 0, 0), (1, 3, 4), (2, 1, maps.shape[2] - 1)):
        a = attention_arithmetic(shipped, *PAIR, stack, layer, head, query)
        np.testing.assert_allclose(a.weights, maps[layer, head, query].numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(a.output, sub_layer_output(shipped, *PAIR, stack, layer)[query].numpy(), atol=1e-5)
        assert a.dots == pytest.approx(a.keys @ a.q, abs=1e-4) and a.scaled == pytest.approx(a.dots / math.sqrt(d_k))
        assert a.scale == math.sqrt(d_k)
        logits = a.scaled + a.mask
        assert a.weights == pytest.approx(np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum(), abs=1e-6)
        assert a.head_output == pytest.approx(a.weights @ a.values, abs=1e-5)
        assert a.concat[head * d_k:(head + 1) * d_k] == pytest.approx(a.head_output)
        out_proj = [block.cross_attn if stack == "cross" else block.self_attn
                    for block in (shipped.model.encoder_layers if stack == "encoder" else shipped.model.decoder_layers)
                    ][layer].out_proj
        expected = a.concat @ out_proj.weight.detach().numpy().T + out_proj.bias.detach().numpy()
        assert a.projected == pytest.approx(expected, abs=1e-4) and a.residual == pytest.approx(a.stream + a.projected)
        assert (a.x == a.stream).all()  # post-norm: attention reads the stream itself


def test_tokens_and_the_causal_mask(shipped):
    a = attention_arithmetic(shipped, *PAIR, "decoder", 0, 0, 2)
    assert a.query_tokens == ["<bos>", "▁Two", "▁young", "▁men", "▁are", "▁playing", "▁soccer."] == a.key_tokens
    assert list(a.mask[:3]) == [0, 0, 0] and np.isneginf(a.mask[3:]).all() and (a.weights[3:] == 0).all()
    cross = attention_arithmetic(shipped, *PAIR, "cross", 0, 0, 2)
    assert cross.query_tokens == a.query_tokens and cross.key_tokens[-1] == "<eos>" and (cross.mask == 0).all()
    encoder = attention_arithmetic(shipped, *PAIR, "encoder", 0, 0, 2)
    assert encoder.query_tokens == encoder.key_tokens == prepare_pair(shipped, *PAIR).source_tokens
    assert encoder.keys.shape == (len(encoder.key_tokens), 64) and encoder.stream.dtype == np.float32


def test_a_pre_norm_model_reads_the_normalised_stream_and_passes_on_the_sum():
    tokenizer = Tokenizer.train(["a b c"], vocab_size=16, kind="word", min_frequency=1)
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                     norm_first=True, attention_bias=True)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        bundle = ModelBundle(Transformer(config).eval(), tokenizer)
    for stack in STACKS:
        a = attention_arithmetic(bundle, "a b c", "c b a", stack, 1, 2, 1)
        norm = {"encoder": "res_attn", "decoder": "res_self", "cross": "res_cross"}[stack]
        blocks = bundle.model.encoder_layers if stack == "encoder" else bundle.model.decoder_layers
        expected_x = getattr(blocks[1], norm).norm(torch.from_numpy(a.stream)).detach().numpy()
        assert a.x == pytest.approx(expected_x, abs=1e-5) and a.output == pytest.approx(a.residual)
        np.testing.assert_allclose(a.output, sub_layer_output(bundle, "a b c", "c b a", stack, 1)[1].numpy(),
                                   atol=1e-5)


def test_heads_switched_off_are_zero_in_the_concatenation(numbers):
    with heads_off(numbers.model, {"cross": {1: [0, 2]}}):
        a = attention_arithmetic(numbers, "9 7", "sieben und neunzig", "cross", 1, 0, 1)
        model_out = sub_layer_output(numbers, "9 7", "sieben und neunzig", "cross", 1)[1].numpy()
    assert (a.concat[:16] == 0).all() and (a.concat[32:48] == 0).all() and a.head_output.any()
    np.testing.assert_allclose(a.output, model_out, atol=1e-5)


def test_bad_indices_are_refused_in_words(shipped):
    with pytest.raises(ValueError, match="unknown attention stack 'self'; allowed: encoder, decoder, cross"):
        attention_arithmetic(shipped, *PAIR, "self", 0, 0, 0)
    with pytest.raises(ValueError, match="layer 3 is out of range 0..2: the encoder has 3 layers"):
        attention_arithmetic(shipped, *PAIR, "encoder", 3, 0, 0)
    with pytest.raises(ValueError, match="head -1 is out of range 0..3: each layer has 4 heads"):
        attention_arithmetic(shipped, *PAIR, "cross", 0, -1, 0)
    with pytest.raises(ValueError, match="query 7 is out of range 0..6: the decoder attention has 7 query positions"):
        attention_arithmetic(shipped, *PAIR, "decoder", 0, 0, 7)
    with pytest.raises(ValueError, match="query '1' is out of range"):
        attention_arithmetic(shipped, *PAIR, "decoder", 0, 0, "1")
    with pytest.raises(ValueError, match="is empty: there is nothing to attend to"):
        attention_arithmetic(shipped, "", "A dog.", "encoder", 0, 0, 0)


@pytest.mark.parametrize("d_k", [4, 32])
def test_a_model_with_d_k_apart_from_d_v_is_spelled_out_too(d_k):
    """Table 3's (B) rows give d_k its own size (d_v stays d_model / h): each projection is split by its width."""
    tokenizer = Tokenizer.train(["a b c"], vocab_size=16, kind="word", min_frequency=1)
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                     d_k=d_k, attention_bias=True)
    assert config.d_k != config.d_head
    with torch.random.fork_rng():
        torch.manual_seed(2)
        bundle = ModelBundle(Transformer(config).eval(), tokenizer)
    pair = prepare_pair(bundle, "a b c", "c b a")
    maps = attention_maps(bundle.model, pair.src, pair.tgt_in)
    for stack in STACKS:
        a = attention_arithmetic(bundle, "a b c", "c b a", stack, 1, 1, 1)
        assert a.q.shape == (d_k,) and a.values.shape[1] == config.d_head and a.scale == pytest.approx(math.sqrt(d_k))
        np.testing.assert_allclose(a.weights, maps[stack][1, 1, 1].numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(a.output, sub_layer_output(bundle, "a b c", "c b a", stack, 1)[1].numpy(),
                                   atol=1e-5)
