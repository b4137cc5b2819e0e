"""Sections 3.1-3.4 as a whole (core/model/transformer.py and layers.py): weight tying, the residual connections
and their norms, dropout where the paper puts it, and a tiny model that learns."""
from __future__ import annotations

import pytest
import torch

from core import ModelConfig, Transformer
from core.model.layers import Residual
from tests.helpers.tiny import V, batch, tiny


def test_three_way_weight_tying_is_one_tensor():
    model = tiny()
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight


def test_separate_vocabularies_tie_only_decoder_embeddings():
    config = ModelConfig.from_preset("tiny", src_vocab_size=30, tgt_vocab_size=50, shared_vocab=False)
    model = Transformer(config)
    assert model.generator.weight is model.tgt_embed.weight
    assert model.src_embed.weight is not model.tgt_embed.weight
    assert model(batch([5], 1).clamp(max=29), batch([4], 2)).shape == (1, 4, 50)


def test_embeddings_go_through_dropout_in_training():
    """Section 5.4: dropout on the sums of the embeddings and the positional encodings."""
    model = tiny(dropout=0.3).train()
    seen = []
    model.embed_dropout.register_forward_hook(lambda module, inputs, output: seen.append((inputs[0], output)))
    model(batch([30] * 8), batch([30] * 8, seed=3))
    x, out = seen[0]
    dropped = out.eq(0) & x.ne(0)
    assert 0.25 < dropped.float().mean() < 0.35
    torch.testing.assert_close(out[~dropped], x[~dropped] / 0.7)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_connection_and_norm_order(norm_first):
    """Post-norm: LayerNorm(x + Sublayer(x)) (section 3.1); pre-norm: x + Sublayer(LayerNorm(x))."""
    torch.manual_seed(0)
    residual = Residual(16, dropout=0.0, norm_first=norm_first)
    residual.norm.weight.data.uniform_(0.5, 1.5)  # not the identity's ones and zeros
    residual.norm.bias.data.uniform_(-0.5, 0.5)
    x, sublayer = torch.randn(3, 16), torch.nn.Linear(16, 16)
    out, _ = residual(x, lambda h: (sublayer(h),))
    expected = x + sublayer(residual.norm(x)) if norm_first else residual.norm(x + sublayer(x))
    torch.testing.assert_close(out, expected)


def test_residual_dropout_falls_on_the_sublayer_output_before_the_add():
    """Section 5.4: dropout "to the output of each sub-layer, before it is added to the sub-layer input"."""
    torch.manual_seed(0)
    residual = Residual(16, dropout=0.5, norm_first=True).train()
    x, sublayer = torch.randn(64, 16), torch.nn.Linear(16, 16)
    out, _ = residual(x, lambda h: (sublayer(h),))
    added = out - x  # the sub-layer's share: zero where dropped, scaled by 1/(1-p) where kept
    full = sublayer(residual.norm(x)) / 0.5
    kept = added.abs() > 1e-6
    assert 0.4 < kept.float().mean() < 0.6
    torch.testing.assert_close(added[kept], full[kept], atol=1e-5, rtol=1e-4)


def test_pre_norm_stacks_end_with_a_layer_norm():
    model = tiny(norm_first=True)
    with torch.no_grad():
        memory = model.encode(batch([6, 6]))
    # Normalised once more, it stays the same (the norm starts with gain 1 and bias 0).
    torch.testing.assert_close(memory, model.encoder_norm(memory), atol=1e-4, rtol=1e-4)


def test_tiny_model_overfits_sixteen_pairs():
    torch.manual_seed(0)
    config = ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V, dropout=0.0)
    model = Transformer(config)
    src = batch([5, 6, 7, 8] * 4, seed=8)
    # bos + the source reversed: something learnable, right-padded like every real batch
    tgt = torch.nn.utils.rnn.pad_sequence([torch.cat([torch.ones(1, dtype=torch.long), row[row.ne(0)].flip(0)])
                                           for row in src], batch_first=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    for _ in range(300):
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.1:
            break
    assert loss.item() < 0.1


