"""Knocking parts out (core/explain/knockout.py): each part does what its section says is left without it, and
the model is bit for bit itself again after the block, also after an error; on the shipped German model, with
the positions knocked out, every reordering of a source's tokens gives the same translation (section 3.5)."""
from __future__ import annotations

import math
import random

import pytest
import torch

from core.explain.hooks import attention_maps, heads_off
from core.explain.knockout import CLAIMS, Knockout, Layer, Sublayer, knocked_out
from core.inference.greedy import greedy_decode
from tests.helpers.tiny import batch, tiny

EVERY_PART = [dict(positions=False), dict(scale=False), dict(residual="encoder.0.self"),
              dict(residual=["decoder.1.cross", "decoder.0.ffn"]), dict(layernorm="encoder.1.ffn"),
              dict(residual="decoder.0.self", layernorm="decoder.0.self"), dict(layer="encoder.1"),
              dict(layer=Layer("decoder", 0)), dict(heads={"cross": {0: [1, 3]}}), dict(causal_mask=False),
              dict(hide_source_token=2)]


def snapshot(model: torch.nn.Module) -> tuple[dict, dict]:
    """Every module (by identity) and every parameter and buffer (copied, the sinusoids' table included)."""
    modules = {name: id(m) for name, m in model.named_modules()}
    tensors = {name: t.detach().clone() for name, t in [*model.named_parameters(), *model.named_buffers()]}
    return modules, tensors


def assert_restored(model: torch.nn.Module, before: tuple[dict, dict]) -> None:
    modules, tensors = snapshot(model)
    assert modules == before[0]
    assert tensors.keys() == before[1].keys()
    assert all(torch.equal(tensors[k], before[1][k]) for k in tensors)
    for name, m in model.named_modules():
        hooks = (m._forward_hooks, m._forward_pre_hooks, m._forward_hooks_with_kwargs, m._forward_pre_hooks_with_kwargs)
        assert not any(hooks), f"a hook is left on {name or 'the model'}"
        assert getattr(m, "head_mask", None) is None


@pytest.mark.parametrize("parts", EVERY_PART, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_each_part_changes_the_output_and_the_model_is_itself_again(parts):
    model = tiny()
    src, tgt = batch([6, 4]), batch([5, 5], seed=7)
    before, kept = model(src, tgt), snapshot(model)
    with knocked_out(model, **parts) as knockout:
        assert knockout.parts == list(parts)
        assert not torch.allclose(model(src, tgt), before)
    assert_restored(model, kept)
    assert torch.equal(model(src, tgt), before)


def test_the_model_is_restored_after_an_error_inside_the_block():
    model = tiny()
    kept = snapshot(model)
    with pytest.raises(RuntimeError, match="inside"):
        with knocked_out(model, Knockout(positions=False, scale=False, residual="decoder.0.cross",
                                         layernorm="decoder.0.cross", layer="encoder.0",
                                         heads=[("encoder", 1, 0)], causal_mask=False, hide_source_token=0)):
            raise RuntimeError("inside")
    assert_restored(model, kept)


def test_without_positions_every_reordering_of_a_source_gives_the_same_translation(shipped):
    """Section 3.5 on the shipped model: attention and the position-wise layers alone see a set of tokens."""
    model = shipped.model
    rng = random.Random(0)
    for sentence in ["Zwei Hunde jagen eine Katze.", "Ein Mann fährt mit dem Fahrrad auf der Straße."]:
        ids = shipped.tokenizer.encode(sentence)
        orders = [ids] + [rng.sample(ids, len(ids)) for _ in range(12)]
        eos = [model.config.eos_id]
        with knocked_out(shipped, positions=False):
            knocked = {tuple(greedy_decode(model, torch.tensor([o + eos]), 60)[0].ids) for o in orders}
        intact = {tuple(greedy_decode(model, torch.tensor([o + eos]), 60)[0].ids) for o in orders}
        assert len(knocked) == 1, [shipped.tokenizer.decode(list(t)) for t in knocked]
        assert len(intact) > 1  # with them, order matters


def test_without_the_scale_the_first_layers_weights_are_the_unscaled_softmax():
    """Layer 1 reads the embeddings either way, so its scores differ by sqrt(d_k) alone: softmax(q·k) is
    softmax(sqrt(d_k) · log softmax(q·k / sqrt(d_k)))."""
    model = tiny()
    src, tgt = [5, 9, 12, 7, 2], [1, 6, 8, 11]
    intact = attention_maps(model, src, tgt)["encoder"][0]
    with knocked_out(model, scale=False):
        unscaled = attention_maps(model, src, tgt)["encoder"][0]
    d_k = model.encoder_layers[0].self_attn.d_k
    torch.testing.assert_close(unscaled, torch.softmax(math.sqrt(d_k) * intact.log(), dim=-1), atol=1e-5, rtol=1e-4)
    entropy = lambda p: -(p * p.clamp_min(1e-12).log()).sum(-1).mean()  # noqa: E731
    assert entropy(unscaled) < entropy(intact)  # sharper


def _layer_io(model, stack: str, index: int, run) -> tuple[torch.Tensor, torch.Tensor]:
    """The first argument and first output of one layer during run()."""
    seen = {}
    layer = (model.encoder_layers if stack == "encoder" else model.decoder_layers)[index]
    handle = layer.register_forward_hook(lambda m, args, out: seen.update(x=args[0], y=out[0]))
    try:
        run()
    finally:
        handle.remove()
    return seen["x"], seen["y"]


def test_residual_layernorm_and_layer_knock_outs_compute_what_they_say():
    model = tiny()
    src, tgt = batch([6]), batch([5], seed=3)
    layer = model.encoder_layers[0]
    self_attention = lambda x: layer.self_attn(x, key_padding=None)[0]  # noqa: E731

    with knocked_out(model, residual="encoder.0.self"):
        x, y = _layer_io(model, "encoder", 0, lambda: model(src, tgt))
        h = layer.res_attn.residual.norm(self_attention(x))  # LayerNorm(Sublayer(x)): no x +
        torch.testing.assert_close(y, layer.res_ffn.norm(h + layer.ffn(h)))
    with knocked_out(model, layernorm="encoder.0.ffn"):
        x, y = _layer_io(model, "encoder", 0, lambda: model(src, tgt))
        h = layer.res_attn.norm(x + self_attention(x))
        torch.testing.assert_close(y, h + layer.ffn(h))  # x + Sublayer(x), not normalised
    with knocked_out(model, layer="encoder.1"):
        x, y = _layer_io(model, "encoder", 1, lambda: model(src, tgt))
        assert torch.equal(x, y)


def test_heads_are_heads_off():
    model = tiny()
    src, tgt = batch([6]), batch([5], seed=3)
    with heads_off(model, {"cross": {0: [1, 3]}, "encoder": {1: [0]}}):
        expected = model(src, tgt)
    with knocked_out(model, heads=[("cross", 0, 3), ("encoder", 1, 0), ("cross", 0, 1)]):
        assert torch.equal(model(src, tgt), expected)


def test_without_the_look_ahead_mask_teacher_forcing_sees_ahead_and_decoding_does_not_change():
    model = tiny()
    src = batch([6])
    a, b = torch.tensor([[1, 5, 9, 12]]), torch.tensor([[1, 5, 9, 30]])  # differ in the last token only
    assert torch.equal(model(src, a)[0, 0], model(src, b)[0, 0])  # masked: position 0 never sees position 3
    with knocked_out(model, causal_mask=False):
        assert not torch.allclose(model(src, a)[0, 0], model(src, b)[0, 0])
        knocked = greedy_decode(model, src, 12)[0].ids
    assert knocked == greedy_decode(model, src, 12)[0].ids


def test_a_hidden_source_token_gets_no_cross_attention():
    model = tiny()
    src, tgt = [5, 9, 12, 7, 2], [1, 6, 8, 11]
    with knocked_out(model, hide_source_token=2):
        cross = attention_maps(model, src, tgt)["cross"]  # (L, h, T, S)
        lone = attention_maps(model, [2], tgt)["cross"]  # a one-token source keeps its only key
    assert torch.all(cross[..., 2] == 0) and torch.allclose(cross.sum(-1), torch.ones(()))
    assert torch.isfinite(lone).all() and torch.allclose(lone.sum(-1), torch.ones(()))


def test_parts_are_named_and_refused_by_name():
    k = Knockout(residual="decoder.2.cross", layer=["encoder.0"], heads={"decoder": {1: [0]}})
    assert k.residual == (Sublayer("decoder", 2, "cross"),) and k.layer == (Layer("encoder", 0),)
    assert k.parts == ["residual", "layer", "heads"]
    assert k.words == ("the residual connection of decoder layer 3's cross-attention; encoder layer 1; "
                       "1 head (decoder L2 H1)")
    assert Knockout().parts == [] and Knockout().words == "nothing"
    assert set(CLAIMS) == set(Knockout.__dataclass_fields__)
    assert str(CLAIMS["positions"]).startswith("3.5: without positions the model cannot tell word order")
    model = tiny()
    for parts, message in [(dict(residual="encoder.0.cross"), "the encoder's sub-layers are self, ffn"),
                           (dict(layer="middle.1"), "a layer is written like 'encoder.1'"),
                           (dict(layer="decoder.5"), "decoder.5: the decoder has layers 0..1"),
                           (dict(heads={"cross": {0: [9]}}), "heads are 0..3"),
                           (dict(heads=[("cross", 0)]), "heads are"),
                           (dict(positions="no"), "positions must be True"),
                           (dict(hide_source_token=-1), "hide_source_token is a source token's index")]:
        with pytest.raises(ValueError, match=message):
            with knocked_out(model, **parts):
                pass
    with pytest.raises(TypeError, match="not both"):
        with knocked_out(model, Knockout(scale=False), positions=False):
            pass
    with pytest.raises(TypeError, match="unexpected keyword"):
        Knockout(position=False)
