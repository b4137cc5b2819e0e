"""core.checkpoint: a checkpoint folder that is incomplete or does not match itself is refused by name."""
from __future__ import annotations

import copy
import json
import threading

import pytest
import torch
from safetensors import safe_open

from core import ModelBundle, ModelConfig, Transformer
from core.checkpoint import load_checkpoint, save_checkpoint
from tests.helpers.models import tiny_bundle


@pytest.fixture
def saved(tmp_path):
    save_checkpoint(tmp_path / "ckpt", tiny_bundle())
    return tmp_path / "ckpt"


def _edit_model_config(folder, **changes) -> None:
    file = folder / "config.json"
    config = json.loads(file.read_text())
    config["model"].update(changes)
    file.write_text(json.dumps(config))


def test_a_saved_checkpoint_loads(saved):
    loaded, original = load_checkpoint(saved).model.state_dict(), tiny_bundle().model.state_dict()
    assert loaded.keys() == original.keys() and all(torch.equal(loaded[k], original[k]) for k in original)


def test_half_stores_float16_weights_that_load_back_as_float32(tmp_path):
    # How the shipped checkpoint is saved (checkpoints/README.md): half the file, the same model to fp16's precision.
    original = tiny_bundle().model.state_dict()
    save_checkpoint(tmp_path / "half", tiny_bundle(), half=True)
    with safe_open(tmp_path / "half" / "model.safetensors", "pt") as stored:
        assert {stored.get_tensor(k).dtype for k in stored.keys()} == {torch.float16}
    loaded = load_checkpoint(tmp_path / "half").model.state_dict()
    assert all(loaded[k].dtype == torch.float32 and torch.equal(loaded[k], original[k].half().float())
               for k in original)
    assert any(not torch.equal(loaded[k], original[k]) for k in original)  # rounded: fp16 was in effect


def test_a_config_whose_layers_the_weights_lack_is_refused(saved):
    # Pre-norm adds a LayerNorm after each stack: weights the file does not hold, which would
    # otherwise start from their fresh initialisation without a word.
    _edit_model_config(saved, norm_first=True)
    with pytest.raises(ValueError, match=r"does not match config.json: missing \['decoder_norm.bias'"):
        load_checkpoint(saved)


def test_a_checkpoint_from_before_attention_bias_loads_with_its_biases(tmp_path):
    """Its config.json has no attention_bias, and every projection had a bias then."""
    tokenizer = tiny_bundle().tokenizer
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                     attention_bias=True)
    bundle = ModelBundle(Transformer(config), tokenizer)
    save_checkpoint(tmp_path / "old", bundle)
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["model"]["attention_bias"]
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    loaded = load_checkpoint(tmp_path / "old")
    assert loaded.model.config.attention_bias and loaded.model.num_parameters() == bundle.model.num_parameters()


@pytest.mark.parametrize("off_by", [-1, 1])
def test_a_tokenizer_of_another_size_than_the_model_vocabulary_is_refused(saved, off_by):
    """Larger: ids past the embedding. Smaller: another model's tokenizer (it loaded, and translated "Hallo"
    into nothing)."""
    entries = tiny_bundle().tokenizer.vocab_size
    _edit_model_config(saved, src_vocab_size=entries + off_by, tgt_vocab_size=entries + off_by)
    with pytest.raises(ValueError, match=f"tokenizer.json has {entries} entries but the model's vocabulary is "
                                         f"{entries + off_by}/{entries + off_by}: the tokenizer is not this model's"):
        load_checkpoint(saved)


def test_a_bundle_whose_tokenizer_is_not_its_models_is_refused_and_never_saved(tmp_path):
    # It would translate garbage without a word, and saved, could never be loaded again (a checkpoint
    # holds one tokenizer for both sides).
    tokenizer = tiny_bundle().tokenizer
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size,
                                     tgt_vocab_size=tokenizer.vocab_size + 5, shared_vocab=False)
    with pytest.raises(ValueError, match=f"the tokenizer has {tokenizer.vocab_size} entries"):
        ModelBundle(Transformer(config), tokenizer)
    bundle = copy.copy(tiny_bundle())
    bundle.model = Transformer(config)  # swapped after the bundle was built
    with pytest.raises(ValueError, match=f"the bundle's tokenizer has {tokenizer.vocab_size} entries"):
        save_checkpoint(tmp_path / "ckpt", bundle)
    assert not (tmp_path / "ckpt").exists()
    with pytest.raises(TypeError, match="ModelBundle takes a core.Transformer and a core.Tokenizer, got "
                                        "Transformer and NoneType"):
        ModelBundle(Transformer(config), None)


def test_weights_holding_nan_are_not_saved(tmp_path):
    bundle = copy.copy(tiny_bundle())
    bundle.model = copy.deepcopy(bundle.model)
    with torch.no_grad():
        bundle.model.decoder_layers[0].ffn.w1.weight[0, 0] = float("nan")
    broken = r"1 weight tensor\(s\) hold NaN or infinite values \(decoder_layers.0.ffn.w1.weight\)"
    with pytest.raises(ValueError, match=broken):
        save_checkpoint(tmp_path / "ckpt", bundle)
    assert not (tmp_path / "ckpt").exists()


def test_a_config_json_lacking_a_field_is_refused_not_filled_with_defaults(saved):
    # Without n_heads the model was rebuilt with the default 8 heads (same weight shapes) and translated worse.
    config = json.loads((saved / "config.json").read_text())
    del config["model"]["n_heads"]
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="the model section lacks n_heads"):
        load_checkpoint(saved)


def test_threads_saving_to_one_path_leave_a_complete_checkpoint(tmp_path):
    # They shared one hidden .saving-PID folder and deleted each other's files mid-save.
    bundle, errors = tiny_bundle(), []

    def save_thrice():
        try:
            for _ in range(3):
                save_checkpoint(tmp_path / "ckpt", bundle, {"step": 1})
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=save_thrice) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and load_checkpoint(tmp_path / "ckpt").model.num_parameters() == bundle.model.num_parameters()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


@pytest.mark.parametrize("missing", ["model.safetensors", "tokenizer.json", "config.json"])
def test_a_folder_without_one_of_the_files_is_not_a_checkpoint(saved, missing):
    (saved / missing).unlink()
    with pytest.raises(ValueError, match=f"is not a checkpoint: missing {missing}"):
        load_checkpoint(saved)
