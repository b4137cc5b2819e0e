"""Issue 42: Table 3's variations in the model and the schedule. Learned positions (row E) are a trained
table of max_len rows, saved and loaded with the config; d_k (row B) shrinks queries and keys alone; the
constant schedule warms up to --lr and stays there."""
from __future__ import annotations

import json

import pytest
import torch

from core import ModelConfig, Transformer
from core.bundle import ModelBundle, parameter_count
from core.checkpoint import load_checkpoint, save_checkpoint
from tests.helpers.models import tiny_bundle

V = 40


def tiny(**overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V, max_len=16,
                                               **overrides)).eval()


def batch(lengths: list[int], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, n in enumerate(lengths):
        out[row, :n] = torch.randint(4, V, (n,), generator=g)
    return out


@pytest.mark.parametrize("overrides", [dict(positional="learned"), dict(d_k=8), dict(d_k=4, n_heads=2),
                                       dict(positional="learned", d_k=24, norm_first=True, attention_bias=True)])
def test_variants_keep_the_two_attention_paths_and_cached_decoding_equal(overrides):
    model = tiny(**overrides)
    src, tgt = batch([7, 3, 5]), batch([6, 6, 2], seed=1)
    fast = model(src, tgt)
    inspected, attention = model(src, tgt, return_attention=True)
    torch.testing.assert_close(fast, inspected, atol=1e-5, rtol=0)
    assert attention["cross"][0].shape == (3, model.config.n_heads, 6, 7)
    tgt = batch([6, 6, 6], seed=2)  # unpadded: a padded target's last positions are not scored
    cache, full = model.start_decoding(src), model(src, tgt).log_softmax(-1)
    for t in range(tgt.size(1)):
        torch.testing.assert_close(model.decode_step(tgt[:, t], cache), full[:, t], atol=1e-4, rtol=0)
    assert model.num_parameters() == parameter_count(model.config)


def test_learned_positions_are_a_trained_table_of_max_len_rows():
    model = tiny(positional="learned")
    table = model.positions.table
    assert isinstance(table, torch.nn.Parameter) and table.shape == (16, 64)
    assert "positions.table" in model.state_dict() and "positions.table" not in tiny().state_dict()
    loss = model(batch([4]), batch([3], seed=1)).sum()
    loss.backward()
    assert table.grad[:4].abs().sum() > 0 and table.grad[4:].abs().sum() == 0  # only the positions read (source: 4)


def test_a_learned_position_model_refuses_a_longer_sequence_by_name():
    with pytest.raises(ValueError, match="source length 17 exceeds the model's max_len 16 tokens; shorten the "
                                         r"input \(its positions are learned: it has none past max_len\)"):
        tiny(positional="learned")(batch([17]), batch([2]))
    with pytest.raises(ValueError, match="or build the model with a larger max_len"):
        tiny()(batch([17]), batch([2]))


def test_d_k_sizes_queries_and_keys_only():
    model = tiny(d_k=8)  # tiny: d_model 64, 4 heads: d_v 16
    attention = model.decoder_layers[0].self_attn
    assert attention.qkv_proj.weight.shape == (8 * 4 * 2 + 64, 64)
    assert model.decoder_layers[0].cross_attn.q_proj.weight.shape == (32, 64)
    assert model.decoder_layers[0].cross_attn.kv_proj.weight.shape == (32 + 64, 64)
    assert model.config.key_size == 8 and model.config.d_head == 16 and tiny().config.key_size == 16


@pytest.mark.parametrize("overrides, field", [(dict(positional="rotary"), "positional"), (dict(d_k=0), "d_k"),
                                              (dict(d_k=65), "d_k"), (dict(d_k=8.0), "d_k")])
def test_bad_variant_fields_are_refused_by_name(overrides, field):
    with pytest.raises(ValueError, match=f"ModelConfig.{field} must"):
        ModelConfig.from_preset("tiny", **overrides)


def test_an_odd_width_needs_sinusoids_only():
    assert ModelConfig(d_model=63, n_heads=7, positional="learned").d_model == 63
    with pytest.raises(ValueError, match="must be even for sinusoidal"):
        ModelConfig(d_model=63, n_heads=7)


def test_learned_positions_and_d_k_are_saved_and_loaded_back(tmp_path):
    tokenizer = tiny_bundle().tokenizer
    torch.manual_seed(0)
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                     max_len=32, positional="learned", d_k=8)
    bundle = ModelBundle(Transformer(config), tokenizer)
    save_checkpoint(tmp_path / "ckpt", bundle)
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["model"]["positional"] == "learned"
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.model.config == config
    torch.testing.assert_close(loaded.model.positions.table, bundle.model.positions.table)


def test_a_checkpoint_from_before_the_fields_loads_as_sinusoidal_with_the_usual_d_k(tmp_path):
    save_checkpoint(tmp_path / "old", tiny_bundle())
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["model"]["positional"], config["model"]["d_k"]
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    loaded = load_checkpoint(tmp_path / "old")
    assert loaded.model.config.positional == "sinusoidal" and loaded.model.config.d_k is None


def test_learned_positions_of_another_length_than_the_config_are_refused(tmp_path):
    tokenizer = tiny_bundle().tokenizer
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                     max_len=32, positional="learned")
    save_checkpoint(tmp_path / "ckpt", ModelBundle(Transformer(config), tokenizer))
    record = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    record["model"]["max_len"] = 64  # the table holds 32 rows: no weights exist for positions 32..63
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"positions.table has shape \(32, 64\), config.json implies \(64, 64\)"):
        load_checkpoint(tmp_path / "ckpt")


