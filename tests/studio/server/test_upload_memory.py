"""Issue 67's upload holes: an uploaded checkpoint's config.json and tokenizers are refused by size, nesting,
entries and longest entry before anything parses them; on a public studio an opened model is capped by
parameters and by what its step costs, as a trained one is; an upload's files are capped in total."""
from __future__ import annotations

import copy
import html
import json
import resource
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from core.checkpoint import save_checkpoint
from core.model.config import ModelConfig
from studio.server import limits, uploads
from studio.server.registry import ModelRegistry
from studio.server.uploads import check_before_loading, open_checkpoint
from tests.helpers.studio import studio_bundle

SHIPPED = Path(__file__).resolve().parents[3] / "checkpoints"


@pytest.fixture
def folder(tmp_path) -> Path:
    return save_checkpoint(tmp_path / "uploaded", studio_bundle())


def _refusal(folder: Path, public: bool = False) -> str:
    with pytest.raises(ValueError) as refused:
        check_before_loading(folder, public)
    return str(refused.value)


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_real_limits_and_the_shipped_checkpoints_within_them():
    assert (limits.MAX_CONFIG_BYTES, limits.MAX_JSON_DEPTH, limits.MAX_TOKENIZER_MB) == (65_536, 32, 16)
    assert (limits.MAX_VOCABULARY, limits.MAX_TOKEN_CHARS) == (64_000, 256)
    assert (limits.PUBLIC_MAX_STEP_S, limits.PUBLIC_MAX_LAYERS, limits.LAYER_STEP_S) == (3.0, 12, 0.0032)
    shipped = [d for d in SHIPPED.iterdir() if (d / "config.json").is_file()]
    assert shipped
    for checkpoint in shipped:  # opened again from a .zip on a public studio, each one is taken
        check_before_loading(checkpoint, public=True)
    for preset in ("tiny", "small"):
        assert limits.public_cost_refusal(ModelConfig.from_preset(preset)) is None


def test_a_tokenizer_with_a_huge_added_token_is_refused_before_it_is_parsed(folder, registry, toasts):
    """Issue 67's 150-million-character added token, scaled down: refused by its length; and a tokenizer.json
    over MAX_TOKENIZER_MB refused by its size without being read (memory measured around it)."""
    _edit_json(folder / "tokenizer.json", lambda t: t["added_tokens"].append(
        {"id": 9999, "content": "x" * 300, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}))
    assert _refusal(folder) == ("tokenizer.json holds an entry of 300 characters; the studio opens tokenizers "
                                "whose entries have at most 256")
    padded = folder / "tokenizer.json"
    with open(padded, "ab") as f:  # valid JSON, 17 MB of trailing whitespace
        f.write(b" " * (17 * 2**20))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    picker, _ = open_checkpoint(registry, [str(p) for p in folder.iterdir()], "studio-tiny")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert toasts[-1].startswith("Cannot open ") and toasts[-1].endswith(
        "tokenizer.json is 17 MB; the studio opens at most 16 MB of it")
    assert grown_mb < 5 and registry.names() == ["studio-tiny"] and picker.value == "studio-tiny"


def test_a_tokenizer_of_too_many_entries_is_refused(folder):
    _edit_json(folder / "tokenizer.json", lambda t: t["model"]["vocab"].update(
        {f"w{i}": 100 + i for i in range(limits.MAX_VOCABULARY)}))
    assert _refusal(folder).startswith("tokenizer.json has 64,0")
    assert _refusal(folder).endswith("entries; the studio opens tokenizers of at most 64,000")


def test_a_deep_or_large_config_is_refused_with_a_message_not_a_recursion_error(folder, registry, toasts):
    (folder / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    open_checkpoint(registry, [str(p) for p in folder.iterdir()], "studio-tiny")
    assert toasts[-1].endswith("config.json is 391 KB; the studio opens at most 64 KB of it")
    (folder / "config.json").write_text('{"a": ' + "[" * 40 + "]" * 40 + "}")
    assert _refusal(folder) == "config.json nests more than 32 levels deep; a checkpoint's nests 4 at most"
    (folder / "config.json").write_text('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}')
    assert limits.json_depth((folder / "config.json").read_text()) == 1  # brackets inside strings do not count


def _with_model(folder: Path, **fields) -> None:
    _edit_json(folder / "config.json", lambda c: c["model"].update(fields))


def test_a_public_studio_opens_models_capped_like_trained_ones(folder, registry, toasts):
    """Issue 67's 243M-parameter upload (8+8 layers, d_model 1024) and 6,000-layer d_model-2 model: refused
    from config.json alone on a public studio (the weights never read); opened on a private one."""
    _with_model(folder, encoder_layers=8, decoder_layers=8, d_model=1024, d_ff=4096, n_heads=16)
    assert _refusal(folder, public=True).startswith("this public studio opens models of at most 10M parameters, "
                                                    "as it trains, and this one has ")
    check_before_loading(folder, public=False)
    _with_model(folder, encoder_layers=6000, decoder_layers=6000, d_model=2, d_ff=8, n_heads=1)
    assert _refusal(folder, public=True).startswith("this public studio takes models of at most 12 layers a stack, "
                                                    "and this one has 6,000")
    open_checkpoint(registry, [str(p) for p in folder.iterdir()], "studio-tiny", public=True)
    assert "12 layers a stack" in toasts[-1] and registry.names() == ["studio-tiny"]


def test_a_step_cost_cap_not_a_parameter_count():
    small = ModelConfig.from_preset("small")
    assert limits.step_seconds(small) < 1
    assert limits.public_cost_refusal(small, 100_000) == (
        "one step of this model on 100,000 tokens would take ~54 CPU-seconds; this public studio takes models whose "
        "step costs at most 3 s (fewer layers, a smaller d_model, d_ff, vocabulary or batch)")
    narrow = ModelConfig.from_preset("tiny", d_model=2, d_ff=8, n_heads=1, encoder_layers=6000, decoder_layers=6000)
    assert limits.step_seconds(narrow) > 30  # the probe's 27 s a step


def test_an_upload_of_files_is_capped_in_total(folder, registry, toasts, monkeypatch):
    monkeypatch.setattr(limits, "MAX_UNPACKED_MB", 0.01)  # scaled down: the tiny checkpoint is ~0.1 MB
    open_checkpoint(registry, [str(p) for p in folder.iterdir()], "studio-tiny")
    assert toasts[-1].endswith(html.escape("MB; the studio accepts at most 0.01 MB in all", quote=False))
    assert uploads.limits is limits and registry.names() == ["studio-tiny"]


def _other_weights(i: int):
    bundle = studio_bundle()
    model = copy.deepcopy(bundle.model)
    with torch.no_grad():
        next(model.parameters()).add_(i + 1)
    return replace(bundle, model=model, info={**bundle.info, "name": f"model{i}"})


def test_the_least_recently_used_upload_leaves_first(tmp_path):
    registry = ModelRegistry(None)
    names = [registry.open_upload(save_checkpoint(tmp_path / f"u{i}", _other_weights(i)), 2)[0] for i in range(2)]
    registry.get(names[0])  # used again: the second is now the least recently used
    third, _ = registry.open_upload(save_checkpoint(tmp_path / "u2", _other_weights(2)), 2)
    assert registry.uploaded == [names[0], third] and names[1] not in registry.names()


def test_visitors_saves_are_unloaded_least_recently_used_first(tmp_path):
    assert limits.MAX_LOADED_VISITOR_SAVES == 2
    for i in range(3):
        bundle = _other_weights(i)
        save_checkpoint(tmp_path / f"save{i}", replace(bundle, info={**bundle.info, limits.VISITOR_SAVE: True}))
    save_checkpoint(tmp_path / "shipped", studio_bundle())
    registry = ModelRegistry(tmp_path)
    for name in ("shipped", "save0", "save1", "save0", "save2"):
        registry.get(name)
    assert sorted(registry._bundles) == ["save0", "save2", "shipped"]  # save1, least recently used, unloaded
    assert registry.get("save1").info[limits.VISITOR_SAVE] is True and "save1" in registry.names()
