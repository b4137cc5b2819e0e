"""core.checkpoint's sharded form (issue #53): weights over max_shard_bytes split as transformers splits them,
so that no file of a checkpoint is over the 10 MiB a Hugging Face Space takes in plain git; both forms load,
a malformed index is refused by name, and the shipped model, re-saved in shards, translates as before."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from core.checkpoint import (
    SHARD_NAME,
    WEIGHTS,
    WEIGHTS_INDEX,
    average_checkpoints,
    copy_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from core.checkpoint.shards import unique_state
from core.inference.translation import translate
from tests.helpers.models import tiny_bundle
from tests.helpers.shipped import SHIPPED

ROOT = Path(__file__).resolve().parents[2]
SHARD_BYTES = 100_000  # the tiny model's 0.9 MB of fp32 weights: ten shards
MAX_FILE_BYTES = 10 * 10**6  # a Space refuses files over 10 MiB; 10 MB is the stricter reading


@pytest.fixture
def sharded(tmp_path) -> Path:
    return save_checkpoint(tmp_path / "sharded", tiny_bundle(), max_shard_bytes=SHARD_BYTES)


def _index(folder: Path) -> dict:
    return json.loads((folder / WEIGHTS_INDEX).read_text())


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    ours, theirs = a.state_dict(), b.state_dict()
    return ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def _refused(folder: Path, message: str) -> None:
    """load_checkpoint refuses folder with a ValueError matching message that names the index, raised by
    core.checkpoint itself (not a traceback from deep inside safetensors or json)."""
    with pytest.raises(ValueError, match=message) as caught:
        load_checkpoint(folder)
    assert str(folder / WEIGHTS_INDEX) in str(caught.value)
    assert Path(caught.traceback[-1].path).parent.name == "checkpoint"


# ----- the two forms ----------------------------------------------------------------------------
def test_a_small_model_keeps_the_single_model_safetensors(tmp_path):
    folder = save_checkpoint(tmp_path / "small", tiny_bundle())
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", WEIGHTS, "tokenizer.json"]


def test_weights_over_the_shard_size_are_split_into_numbered_shards_and_an_index(sharded):
    shards = sorted(p.name for p in sharded.glob("model-*.safetensors"))
    assert not (sharded / WEIGHTS).exists() and len(shards) > 2
    assert shards == [f"model-{n:05d}-of-{len(shards):05d}.safetensors" for n in range(1, len(shards) + 1)]
    index = _index(sharded)
    assert set(index) == {"metadata", "weight_map"} and set(index["weight_map"].values()) == set(shards)
    stored = {name: load_file(str(sharded / name)) for name in shards}
    for name, tensors in stored.items():
        assert sum(t.numel() * t.element_size() for t in tensors.values()) <= SHARD_BYTES or len(tensors) == 1
        assert all(index["weight_map"][tensor] == name for tensor in tensors)
    total = sum(t.numel() * t.element_size() for tensors in stored.values() for t in tensors.values())
    assert index["metadata"]["total_size"] == total
    # safetensors creates its files private (0600): shards get the mode the umask gives config.json.
    assert {(sharded / name).stat().st_mode for name in shards} == {(sharded / "config.json").stat().st_mode}


@pytest.mark.parametrize("max_bytes", [60_000, SHARD_BYTES, 400_000])  # 60 KB: the FFN matrices (64 KB) alone
def test_the_shards_and_the_index_are_those_transformers_writes(tmp_path, max_bytes):
    """transformers' save_pretrained splits with huggingface_hub's split_torch_state_dict_into_shards and
    writes the index with json.dumps(index, indent=2, sort_keys=True) + "\\n"."""
    hub = pytest.importorskip("huggingface_hub")
    split = hub.split_torch_state_dict_into_shards(unique_state(tiny_bundle().model, None),
                                                   filename_pattern="model{suffix}.safetensors",
                                                   max_shard_size=max_bytes)
    folder = save_checkpoint(tmp_path / "ckpt", tiny_bundle(), max_shard_bytes=max_bytes)
    expected = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
    assert (folder / WEIGHTS_INDEX).read_text() == json.dumps(expected, indent=2, sort_keys=True) + "\n"
    for name, tensors in split.filename_to_tensors.items():
        with open(folder / name, "rb") as f:  # the safetensors header: its length, then JSON
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        assert header.pop("__metadata__") == {"format": "pt"} and sorted(header) == sorted(tensors)


def test_sharded_and_single_file_checkpoints_load_the_same_model(tmp_path, sharded):
    single = save_checkpoint(tmp_path / "single", tiny_bundle())
    assert _same_weights(load_checkpoint(sharded).model, load_checkpoint(single).model)
    assert _same_weights(load_checkpoint(sharded).model, tiny_bundle().model)
    assert load_checkpoint(sharded).info == load_checkpoint(single).info


def test_half_precision_shards_hold_float16_and_load_back_as_float32(tmp_path):
    folder = save_checkpoint(tmp_path / "half", tiny_bundle(), half=True, max_shard_bytes=SHARD_BYTES // 2)
    stored = [t for shard in folder.glob("model-*.safetensors") for t in load_file(str(shard)).values()]
    assert len(list(folder.glob("model-*.safetensors"))) > 2 and {t.dtype for t in stored} == {torch.float16}
    original = tiny_bundle().model.state_dict()
    loaded = load_checkpoint(folder).model.state_dict()
    assert all(loaded[k].dtype == torch.float32 and torch.equal(loaded[k], original[k].half().float())
               for k in original)


def test_a_sharded_checkpoint_copies_averages_and_saves_again(tmp_path, sharded):
    copy = copy_checkpoint(sharded, tmp_path / "final")
    assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in sharded.iterdir())
    bundles = [load_checkpoint(sharded), load_checkpoint(copy)]
    averaged = save_checkpoint(tmp_path / "averaged", average_checkpoints(bundles), max_shard_bytes=SHARD_BYTES)
    assert (averaged / WEIGHTS_INDEX).is_file() and _same_weights(load_checkpoint(averaged).model, bundles[0].model)


def test_max_shard_bytes_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="max_shard_bytes must be a positive number of bytes, got 0"):
        save_checkpoint(tmp_path / "ckpt", tiny_bundle(), max_shard_bytes=0)
    assert not (tmp_path / "ckpt").exists()


# ----- a malformed index is refused by name ------------------------------------------------------
def _rewrite_shard(folder: Path, shard: str, change) -> None:
    """Write shard again with change(tensors) applied: what a hand-made or damaged checkpoint holds."""
    tensors = load_file(str(folder / shard))
    change(tensors)
    save_file(tensors, str(folder / shard), metadata={"format": "pt"})


def test_an_index_naming_a_missing_shard_is_refused(sharded):
    last = sorted(set(_index(sharded)["weight_map"].values()))[-1]
    (sharded / last).unlink()
    _refused(sharded, f"names {last}, which is missing")


def test_a_tensor_in_two_shards_is_refused(sharded):
    weight_map = _index(sharded)["weight_map"]
    first, second = sorted(set(weight_map.values()))[:2]
    twice = next(name for name, shard in weight_map.items() if shard == second)
    copy = load_file(str(sharded / second))[twice]
    _rewrite_shard(sharded, first, lambda tensors: tensors.update({twice: copy}))
    _refused(sharded, f"{twice} is stored twice, in {first} and {second}")


def test_an_index_listing_a_tensor_twice_is_refused(sharded):
    # JSON allows a key twice and json.loads keeps the last: the tensor would load from either shard unsaid.
    weight_map = _index(sharded)["weight_map"]
    name, shard = next(iter(weight_map.items()))
    other = next(s for s in weight_map.values() if s != shard)
    entries = [f'"{tensor}": "{file}"' for tensor, file in weight_map.items()] + [f'"{name}": "{other}"']
    (sharded / WEIGHTS_INDEX).write_text('{"weight_map": {' + ", ".join(entries) + "}}")
    _refused(sharded, f"lists {name} twice")


def test_a_tensor_missing_from_its_shard_is_refused(sharded):
    name, shard = next(iter(_index(sharded)["weight_map"].items()))
    _rewrite_shard(sharded, shard, lambda tensors: tensors.pop(name))
    _refused(sharded, f"{name} is missing: the index puts it in {shard}, which does not hold it")


def test_a_tensor_missing_from_index_and_shards_alike_is_refused(sharded):
    index = _index(sharded)
    name = "decoder_layers.0.ffn.w1.bias"  # a bias: without a matrix the size check would refuse it first
    _rewrite_shard(sharded, index["weight_map"].pop(name), lambda tensors: tensors.pop(name))
    (sharded / WEIGHTS_INDEX).write_text(json.dumps(index))
    _refused(sharded, rf"does not match config.json: missing \['{name}'\]")


def test_a_tensor_the_index_does_not_list_is_refused(sharded):
    index = _index(sharded)
    name = sorted(index["weight_map"])[0]
    shard = index["weight_map"].pop(name)
    (sharded / WEIGHTS_INDEX).write_text(json.dumps(index))
    _refused(sharded, f"does not list {name}, stored in {shard}")


@pytest.mark.parametrize("shard", ["../model.safetensors", "/etc/passwd", "config.json", 7])
def test_an_index_cannot_name_a_file_outside_the_shards(sharded, shard):
    # An uploaded index must not send the loader to another file of the server.
    index = _index(sharded)
    index["weight_map"][next(iter(index["weight_map"]))] = shard
    (sharded / WEIGHTS_INDEX).write_text(json.dumps(index))
    _refused(sharded, "as a shard; shards are files of the checkpoint's folder named like "
                      "model-00001-of-00002.safetensors")


@pytest.mark.parametrize("text", ["{not json", "[]", '{"weight_map": {}}', '{"metadata": {}}'])
def test_an_index_that_is_not_one_is_refused(sharded, text):
    (sharded / WEIGHTS_INDEX).write_text(text)
    _refused(sharded, "not valid JSON|no weight_map naming each tensor's shard")


def test_weights_in_both_forms_at_once_are_refused(tmp_path, sharded):
    single = save_checkpoint(tmp_path / "single", tiny_bundle())
    shutil.copy(single / WEIGHTS, sharded / WEIGHTS)
    with pytest.raises(ValueError, match=f"holds both {WEIGHTS} and {WEIGHTS_INDEX}"):
        load_checkpoint(sharded)


def test_a_folder_with_neither_form_is_not_a_checkpoint(sharded):
    (sharded / WEIGHTS_INDEX).unlink()
    with pytest.raises(ValueError, match=f"is not a checkpoint: missing {WEIGHTS}"):
        load_checkpoint(sharded)


# ----- never half-written -----------------------------------------------------------------------
@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_save_failing_after_some_shards_leaves_the_previous_checkpoint_whole(sharded, monkeypatch, failure):
    from core.checkpoint import shards

    before = {p.name: p.read_bytes() for p in sharded.iterdir()}
    written = []
    real_save_file = shards.save_file

    def fail_on_the_third_shard(tensors, filename, *args, **kwargs):
        written.append(filename)
        if len(written) == 3:
            raise failure
        real_save_file(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(shards, "save_file", fail_on_the_third_shard)
    with pytest.raises(type(failure)):
        save_checkpoint(sharded, tiny_bundle(), half=True, max_shard_bytes=SHARD_BYTES // 2)
    assert {p.name: p.read_bytes() for p in sharded.iterdir()} == before
    assert sorted(p.name for p in sharded.parent.iterdir()) == ["sharded"]  # no hidden half-written copy
    assert _same_weights(load_checkpoint(sharded).model, tiny_bundle().model)


def test_a_save_replaces_every_file_of_the_other_form(sharded):
    # A single-file save over a sharded checkpoint must not leave its shards beside model.safetensors.
    save_checkpoint(sharded, tiny_bundle())
    assert sorted(p.name for p in sharded.iterdir()) == ["config.json", WEIGHTS, "tokenizer.json"]
    save_checkpoint(sharded, tiny_bundle(), max_shard_bytes=SHARD_BYTES)
    assert not (sharded / WEIGHTS).exists() and load_checkpoint(sharded).model.num_parameters() > 0


# ----- where checkpoints travel: the studio's .zip, and an upload of it -------------------------
def test_the_studios_zip_of_a_sharded_checkpoint_opens_as_an_upload(tmp_path, sharded):
    from studio.server import uploads
    from studio.train.saving import zip_checkpoint

    (sharded / "trainer.pt").write_bytes(b"never zipped")
    (tmp_path / "downloads").mkdir()
    archive = zip_checkpoint(sharded, tmp_path / "downloads")
    folder = uploads._assemble([str(archive)])
    try:
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in sharded.iterdir()
                                                                  if p.name != "trainer.pt")
        assert _same_weights(load_checkpoint(folder).model, tiny_bundle().model)
    finally:
        shutil.rmtree(folder.parent)
    loose = uploads._assemble([str(p) for p in sharded.iterdir()])  # the files uploaded together
    try:
        assert _same_weights(load_checkpoint(loose).model, tiny_bundle().model)
    finally:
        shutil.rmtree(loose.parent)


# ----- the shipped model ------------------------------------------------------------------------
# Greedy translations by the shipped model as it was before the split: the single model.safetensors of
# git blob fc6ff93f (commit d3b636a), loaded with core.load_checkpoint and decoded with core.translate.
SENTENCES = ["Ein Hund rennt durch den Schnee.", "Zwei Kinder spielen im Park mit einem Ball.",
             "Eine Frau in einem roten Kleid singt auf der Bühne."]
BEFORE_THE_SPLIT = ["A dog runs through the snow.", "Two children playing with a ball in the park.",
                    "A woman in a red dress is singing on stage."]
SINGLE_FILE_BLOB = "fc6ff93fb104cb7009e9b9e076f5f1883d8e49b5"


def test_the_shipped_model_is_sharded_with_every_file_under_10_mb():
    files = sorted(p.name for p in SHIPPED.iterdir())
    assert files == ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                     WEIGHTS_INDEX, "tokenizer.json"]
    assert all(SHARD_NAME.fullmatch(name) for name in _index(SHIPPED)["weight_map"].values())
    assert all((SHIPPED / name).stat().st_size <= MAX_FILE_BYTES for name in files)


def test_the_shipped_model_translates_as_it_did_before_the_split():
    assert translate(load_checkpoint(SHIPPED), SENTENCES, method="greedy") == BEFORE_THE_SPLIT


def test_the_shipped_shards_hold_the_single_files_tensors_bit_for_bit(tmp_path):
    """Against the file itself, where git still has it (not in a shallow clone that lacks the blob)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    blob = subprocess.run(["git", "cat-file", "blob", SINGLE_FILE_BLOB], cwd=ROOT, capture_output=True)
    if blob.returncode != 0:
        pytest.skip(f"git has no blob {SINGLE_FILE_BLOB} (a shallow clone)")
    (tmp_path / WEIGHTS).write_bytes(blob.stdout)
    before = load_file(str(tmp_path / WEIGHTS))
    after = {name: t for shard in SHIPPED.glob("model-*.safetensors") for name, t in load_file(str(shard)).items()}
    assert before.keys() == after.keys() and {t.dtype for t in after.values()} == {torch.float16}
    assert all(torch.equal(before[k].view(torch.int16), after[k].view(torch.int16)) for k in before)
