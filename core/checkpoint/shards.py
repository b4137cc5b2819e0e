"""A checkpoint's weights on disk, in one of two forms: model.safetensors, or above max_shard_bytes the
shards and index that transformers' save_pretrained writes (huggingface_hub's split, so Hugging Face
tools read either); written from a state with each tied matrix once (section 3.4 shares one matrix
between the embeddings and the pre-softmax projection), and read back from the headers alone with the
index checked against the shards."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import split_torch_state_dict_into_shards
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from ..model.transformer import Transformer
from .layout import SHARD_NAME, WEIGHTS, WEIGHTS_INDEX

# A Hugging Face Space refuses a file over 10 MiB pushed in plain git: 9 MB of tensors (decimal, as
# transformers' "9MB") and a header of a few KB stay below it.
MAX_SHARD_BYTES = 9 * 10**6
# huggingface_hub names the files: model.safetensors for one, model-00001-of-00002.safetensors for shards.
FILE_PATTERN = "model{suffix}.safetensors"

Stored = dict[str, tuple[Path, list[int]]]  # tensor name -> (its file, its shape)


def unique_state(model: Transformer, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """state_dict with each shared (tied) tensor once, as contiguous CPU tensors: safetensors refuses
    tensors that share memory, and the splitter then sees each stored tensor once."""
    seen: set[int] = set()
    out = {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        tensor = tensor.detach().to("cpu")
        if dtype is not None and tensor.is_floating_point():
            tensor = tensor.to(dtype)
        out[name] = tensor.contiguous()
    return out


def write_weights(folder: Path, state: dict[str, torch.Tensor], max_shard_bytes: int) -> list[Path]:
    """state as model.safetensors or, above max_shard_bytes, as shards and their index laid out as
    transformers' save_pretrained lays them out: tensors in state order, a new shard whenever the next
    one would tip the current one over, a larger one alone in its own; the files written."""
    split = split_torch_state_dict_into_shards(state, filename_pattern=FILE_PATTERN, max_shard_size=max_shard_bytes)
    for name, tensors in split.filename_to_tensors.items():
        save_file({tensor: state[tensor] for tensor in tensors}, str(folder / name), metadata={"format": "pt"})
    if split.is_sharded:
        index = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
        (folder / WEIGHTS_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return [folder / name for name in split.filename_to_tensors]


def weights_source(path: Path) -> Path:
    """The file that says which tensors the checkpoint holds: model.safetensors, or a sharded one's index."""
    return path / WEIGHTS_INDEX if (path / WEIGHTS_INDEX).exists() else path / WEIGHTS


def stored_tensors(path: Path) -> Stored:
    """Each stored tensor's file and shape, from the safetensors headers alone (nothing allocated yet): of
    model.safetensors, or of the shards a sharded checkpoint's index names, which must agree with it."""
    index = path / WEIGHTS_INDEX
    if not index.exists():
        return _header(path / WEIGHTS)
    if (path / WEIGHTS).exists():
        raise ValueError(f"{path} holds both {WEIGHTS} and {WEIGHTS_INDEX}, so which weights are its is unclear; "
                         f"remove one")
    weight_map = _read_index(index)
    shards = sorted(set(weight_map.values()))
    absent = [shard for shard in shards if not (path / shard).is_file()]
    if absent:
        raise ValueError(f"{index} names {', '.join(absent)}, which {'is' if len(absent) == 1 else 'are'} missing")
    stored: Stored = {}
    for shard in shards:
        for name, (file, shape) in _header(path / shard).items():
            if name in stored:
                raise ValueError(f"{index}: {name} is stored twice, in {stored[name][0].name} and {shard}")
            stored[name] = (file, shape)
    _check_index_matches(index, weight_map, stored)
    return stored


def _read_index(index: Path) -> dict[str, str]:
    """A sharded checkpoint's weight_map, tensor name -> shard file name: every shard a file of the
    checkpoint's own folder (an uploaded index must not send the loader anywhere else)."""
    try:
        content = json.loads(index.read_text(), object_pairs_hook=lambda pairs: _without_repeats(pairs, index))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{index}: not valid JSON ({exc})") from None
    weight_map = content.get("weight_map") if isinstance(content, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index}: no weight_map naming each tensor's shard")
    for shard in weight_map.values():
        if not isinstance(shard, str) or not SHARD_NAME.fullmatch(shard):
            raise ValueError(f"{index} names {shard!r} as a shard; shards are files of the checkpoint's folder "
                             f"named like model-00001-of-00002.safetensors")
    return weight_map


def _without_repeats(pairs: list[tuple[str, Any]], index: Path) -> dict[str, Any]:
    """A JSON object as a dict, refused when it gives a key twice: json.loads would keep the last, and a
    tensor listed in two shards would load from whichever came last."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"{index} lists {key} twice: a tensor belongs in one shard (and JSON keeps the last)")
        seen.add(key)
    return dict(pairs)


def _check_index_matches(index: Path, weight_map: dict[str, str], stored: Stored) -> None:
    """Each tensor in the shard the index names, and none stored that the index leaves out."""
    for name, shard in weight_map.items():
        if name not in stored:
            raise ValueError(f"{index}: {name} is missing: the index puts it in {shard}, which does not hold it")
        if stored[name][0].name != shard:
            raise ValueError(f"{index}: {name} is in {stored[name][0].name}, not in {shard} as the index says")
    unlisted = sorted(set(stored) - set(weight_map))
    if unlisted:
        raise ValueError(f"{index} does not list {', '.join(unlisted[:3])}, stored in {stored[unlisted[0]][0].name}")


def _header(file: Path) -> Stored:
    """Each tensor of one safetensors file with its shape, read from the header alone."""
    try:
        with safe_open(str(file), "pt") as f:
            return {name: (file, f.get_slice(name).get_shape()) for name in f.keys()}
    except (SafetensorError, OSError) as exc:
        raise ValueError(f"{file}: not a readable safetensors file ({exc})") from None
