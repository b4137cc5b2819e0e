"""ModelConfig (core/model/config.py): the paper's presets, JSON round trip, bad fields named."""
from __future__ import annotations

import json

import pytest

from core import ModelConfig, Transformer
from core.model.config import PRESETS
from tests.helpers.tiny import V


def test_paper_base_has_63_million_parameters():
    """The base model (Table 3 rounds its count to 65M) counted piece by piece: a shared 37k embedding
    (section 3.4), eq. 2's feed-forward layers with their biases, 4 projection matrices per attention
    (3.2.2: no biases), and a layer norm (gain and bias) after each sub-layer; no norm after the stacks
    (section 3.1, post-norm). attention_bias adds fairseq's 4·d_model per attention."""
    config = ModelConfig.from_preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000)
    d, ff, vocab = 512, 2048, 37000
    attention, ffn, norm = 4 * d * d, d * ff + ff + ff * d + d, 2 * d
    encoder_layer, decoder_layer = attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm
    assert Transformer(config).num_parameters() == vocab * d + 6 * encoder_layer + 6 * decoder_layer == 63_045_632
    biased = Transformer(ModelConfig.from_preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000,
                                                 attention_bias=True))
    assert biased.num_parameters() == 63_045_632 + 18 * 4 * d  # 6 + 2·6 attentions
    assert not any(name.endswith(("proj.bias",)) for name, _ in Transformer(config).named_parameters())


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_and_round_trips_json(name):
    config = ModelConfig.from_preset(name, src_vocab_size=100, tgt_vocab_size=100)
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert PRESETS[name]["d_model"] == config.d_model


def test_encoder_and_decoder_depth_may_differ():
    model = Transformer(ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V,
                                                encoder_layers=3, decoder_layers=1))
    assert len(model.encoder_layers) == 3 and len(model.decoder_layers) == 1


@pytest.mark.parametrize("overrides,field", [
    (dict(d_model=100, n_heads=3), "n_heads"),
    (dict(d_model=0), "d_model"),
    (dict(d_ff=-1), "d_ff"),
    (dict(encoder_layers=0), "encoder_layers"),
    (dict(dropout=1.5), "dropout"),
    (dict(src_vocab_size=10, tgt_vocab_size=12), "shared_vocab"),
    (dict(dropout="0.1"), "dropout"),  # as a hand-edited config.json might say
    (dict(norm_first="false"), "norm_first"),  # a non-empty string would count as true
    (dict(d_model=64.0), "d_model"),
    (dict(eos_id=5), "eos_id must be 2, the tokenizer's id for <eos>"),  # it would decode with a wrong eos
    (dict(pad_id="0"), "pad_id"),
    (dict(max_len=16_385), "max_len must be at most 16,384"),  # its positional table is allocated whole
])
def test_invalid_configs_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_preset("tiny", **overrides)


def test_a_config_must_be_an_object_of_fields():
    with pytest.raises(ValueError, match="needs an object of fields, got NoneType"):
        ModelConfig.from_dict(None)


def test_unknown_preset_lists_allowed_ones():
    with pytest.raises(ValueError, match="paper-base"):
        ModelConfig.from_preset("gigantic")


def test_unknown_field_is_refused():
    with pytest.raises(ValueError, match="d_modle"):
        ModelConfig.from_dict({"d_modle": 12})
