"""Checkpoints: a directory that is complete or absent, never half-written.

    model.safetensors   weights (no pickle; tied matrices stored once); above max_shard_bytes (9 MB, so
                        that a Hugging Face Space takes every file in plain git) split as transformers
                        splits them: model-00001-of-0000N.safetensors files and
                        model.safetensors.index.json, which names each tensor's file
    config.json         format version, model config, training setup, data, metrics
    tokenizer.json      the vocabulary (Hugging Face tokenizers): both languages' (section 3.4), or
                        with separate vocabularies the source's
    target_tokenizer.json  separate vocabularies only: the target's
    trainer.pt          optional: optimizer, schedule, step, RNG, for exact resume;
                        read with torch.load(weights_only=True) only

A save writes everything into a hidden sibling folder, fsyncs it, then renames it
into place; a crash at any moment leaves the previous checkpoint loadable.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import io
import json
import math
import os
import pickle
import pickletools
import re
import shutil
import threading
import warnings
import zipfile
from pathlib import Path
from typing import Any, Sequence

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .bundle import ModelBundle, check_tokenizer_fits, resolve_device
from .data.tokenizer import Tokenizer
from .model.config import ModelConfig
from .model.transformer import Transformer

FORMAT_VERSION = 1
WEIGHTS = "model.safetensors"
# A sharded checkpoint has the index and its shards in place of WEIGHTS, named as transformers names them.
WEIGHTS_INDEX = "model.safetensors.index.json"
SHARD_NAME = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
# A Hugging Face Space refuses a file over 10 MiB pushed in plain git: 9 MB of tensors (decimal, as
# transformers' "9MB") and a header of a few KB stay below it.
MAX_SHARD_BYTES = 9 * 10**6
FILES = (WEIGHTS, "config.json", "tokenizer.json")
TARGET_TOKENIZER = "target_tokenizer.json"
TRAINER_STATE = "trainer.pt"
OPTIONAL_FILES = (TRAINER_STATE, TARGET_TOKENIZER)
# What torch's weights-only unpickler says of a pickle that names a class or function (loading it would
# call them, so it could run code); of damaged bytes it says other things ("Unsupported operand 149").
NAMES_CODE = re.compile(r"GLOBAL|unrecognized function|Can only (create new object|build)")
CODE_OPCODES = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD"}
# One save at a time per process: two threads saving to one path (the studio's Save clicked twice,
# a run's periodic save) would share the hidden .saving-PID folder and delete each other's files.
_SAVING = threading.Lock()


def _unique_state(model: Transformer, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """state_dict with each shared (tied) tensor once, as contiguous CPU tensors."""
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


def _fsync_dir(path: Path) -> None:
    for file in path.iterdir():
        with open(file, "rb") as f:
            os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _backup_of(path: Path) -> Path:
    return path.with_name(f".{path.name}.previous")


def save_checkpoint(path: str | Path, bundle: ModelBundle, trainer_state: dict[str, Any] | None = None,
                    *, half: bool = False, max_shard_bytes: int = MAX_SHARD_BYTES) -> Path:
    """Write bundle (and optionally the trainer state) to the directory path, atomically.
    half=True stores float16 weights (for shipping); they load back as float32. Weights of more than
    max_shard_bytes are split into shards of at most that many bytes (a larger tensor alone in its own)."""
    path = Path(path)
    if not isinstance(bundle, ModelBundle):
        raise TypeError(f"save_checkpoint takes a ModelBundle, got {type(bundle).__name__}")
    if max_shard_bytes < 1:
        raise ValueError(f"max_shard_bytes must be a positive number of bytes, got {max_shard_bytes}")
    check_tokenizer_fits(bundle.tokenizer, bundle.model.config, "the bundle's tokenizer",  # changed since built?
                         bundle.separate_target, "the bundle's target tokenizer")
    broken = [name for name, p in bundle.model.named_parameters() if not p.isfinite().all()]
    if broken:  # load_checkpoint would refuse them: better to say so now than to leave an unloadable checkpoint
        raise ValueError(f"not saving {path}: {len(broken)} weight tensor(s) hold NaN or infinite values "
                         f"({', '.join(broken[:3])}); the model diverged")
    with _replacing(path) as tmp:
        weights = _write_weights(tmp, _unique_state(bundle.model, torch.float16 if half else None), max_shard_bytes)
        info = {k: v for k, v in bundle.info.items() if k not in ("format_version", "model")}
        config = {"format_version": FORMAT_VERSION, "model": bundle.model.config.to_dict(), **info}
        (tmp / "config.json").write_text(json.dumps(config, indent=2, default=str))
        bundle.tokenizer.save(tmp / "tokenizer.json")
        if bundle.separate_target is not None:
            bundle.separate_target.save(tmp / TARGET_TOKENIZER)
        # safetensors creates its files private (0600); give them the mode the umask gives the others.
        for file in weights:
            shutil.copymode(tmp / "config.json", file)
        if trainer_state is not None:
            torch.save(trainer_state, tmp / TRAINER_STATE)
    return path


def _write_weights(folder: Path, state: dict[str, torch.Tensor], max_shard_bytes: int) -> list[Path]:
    """state as model.safetensors or, above max_shard_bytes, as shards and their index laid out as
    transformers' save_pretrained lays them out (so Hugging Face tools read either); the files written."""
    shards = _split_into_shards(state, max_shard_bytes)
    if len(shards) == 1:
        save_file(state, str(folder / WEIGHTS), metadata={"format": "pt"})
        return [folder / WEIGHTS]
    names = [f"model-{n:05d}-of-{len(shards):05d}.safetensors" for n in range(1, len(shards) + 1)]
    for name, shard in zip(names, shards):
        save_file(shard, str(folder / name), metadata={"format": "pt"})
    index = {"metadata": {"total_size": sum(_nbytes(tensor) for tensor in state.values())},
             "weight_map": {tensor: name for name, shard in zip(names, shards) for tensor in shard}}
    (folder / WEIGHTS_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return [folder / name for name in names]


def _split_into_shards(state: dict[str, torch.Tensor], max_bytes: int) -> list[dict[str, torch.Tensor]]:
    """huggingface_hub's split (what transformers shards with): tensors in state_dict order, a new shard
    whenever the next one would tip the current one over max_bytes, and a tensor larger than
    max_bytes alone in a shard of its own."""
    shards: list[dict[str, torch.Tensor]] = []
    current: dict[str, torch.Tensor] = {}
    current_bytes = 0
    for name, tensor in state.items():
        size = _nbytes(tensor)
        if size > max_bytes:
            shards.append({name: tensor})
            continue
        if current_bytes + size > max_bytes:
            shards.append(current)
            current, current_bytes = {}, 0
        current[name] = tensor
        current_bytes += size
    return shards + [current] if current else shards


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def is_checkpoint_file(name: str) -> bool:
    """Whether a file of this name belongs in a checkpoint folder: a save replaces the folder whole
    and a copy takes these, so anything else there is not a checkpoint's."""
    return name in FILES + OPTIONAL_FILES or name == WEIGHTS_INDEX or SHARD_NAME.fullmatch(name) is not None


def checkpoint_files(folder: Path) -> list[str]:
    """The names of the checkpoint's files in folder, sorted: its weights in either form, config,
    tokenizers and trainer state."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and is_checkpoint_file(p.name))


def missing_files(folder: Path) -> list[str]:
    """Which of FILES folder lacks; the weights are there when model.safetensors is or, sharded, its index
    (the shards it names are checked on loading)."""
    missing = [name for name in FILES if not (folder / name).is_file()]
    if WEIGHTS in missing and (folder / WEIGHTS_INDEX).is_file():
        missing.remove(WEIGHTS)
    return missing


def copy_checkpoint(source: str | Path, path: str | Path) -> Path:
    """Copy the checkpoint folder source to path as atomically as a save (a run's final/ from its
    last step-N): a copy cut short leaves the previous checkpoint at path, if any, unchanged."""
    source, path = Path(source), Path(path)
    with _replacing(path) as tmp:
        for name in checkpoint_files(source):
            shutil.copy2(source / name, tmp / name)
    return path


@contextlib.contextmanager
def _replacing(path: Path):
    """A hidden sibling folder to fill with a checkpoint's files; once filled, it is fsynced and
    renamed into place. A failure (or Ctrl-C) while filling removes it and leaves path as it was."""
    with _SAVING:
        _check_replaceable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_saves(path)
        tmp = path.with_name(f".{path.name}.saving-{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        try:
            tmp.mkdir()
            yield tmp
            _fsync_dir(tmp)
            _swap_into_place(tmp, path)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError):  # disk full, read-only, quota: say what was kept
                raise OSError(exc.errno, f"saving checkpoint {path} failed ({exc.strerror or exc}); "
                                         f"the previous checkpoint there, if any, is unchanged") from exc
            raise


def _check_replaceable(path: Path) -> None:
    """A save replaces the directory at path whole, so it must hold nothing but a checkpoint's files:
    saving to a folder of runs or notes by mistake would otherwise delete them."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"cannot save a checkpoint to {path}: it is a file, not a directory")
    others = sorted(p.name for p in path.iterdir() if not is_checkpoint_file(p.name)) if path.exists() else []
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ValueError(f"cannot save a checkpoint to {path}: the folder holds other files ({shown}), "
                         f"which saving would delete; choose a new or empty folder")


def _remove_stale_saves(path: Path) -> None:
    """Delete the hidden .NAME.saving-PID folders of saves whose process died (kill -9, power
    loss): each can be as large as the checkpoint."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.saving-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _swap_into_place(tmp: Path, path: Path) -> None:
    backup = _backup_of(path)
    if path.exists():
        if backup.exists():
            shutil.rmtree(backup)  # path is complete, so this copy is stale
        os.rename(path, backup)  # a crash right here is covered by load_checkpoint's fallback
    # When path is missing, backup is the only complete copy (an earlier save died between the
    # two renames): it is deleted only after the new checkpoint is in place.
    try:
        os.rename(tmp, path)
    except OSError:
        if backup.exists() and not path.exists():
            os.rename(backup, path)  # put the previous checkpoint back under its name
        raise
    _fsync_parent(path)
    shutil.rmtree(backup, ignore_errors=True)


def _fsync_parent(path: Path) -> None:
    """Make the renames durable (a power cut after a rename could otherwise undo it); best
    effort: some file systems cannot fsync a directory, and the checkpoint is in place already."""
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def resolve_checkpoint(path: str | Path) -> Path:
    """The directory to read: path, or the previous copy if a save died mid-swap."""
    path = Path(path)
    if not path.exists() and _backup_of(path).is_dir():
        warnings.warn(f"{path} is missing (interrupted save); using the previous copy {_backup_of(path)}",
                      stacklevel=2)
        return _backup_of(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if not path.is_dir():
        raise ValueError(f"{path} is not a checkpoint: expected a directory with {', '.join(FILES)}")
    missing = missing_files(path)
    if missing:
        raise ValueError(f"{path} is not a checkpoint: missing {', '.join(missing)}")
    return path


def read_config(path: str | Path) -> dict[str, Any]:
    """config.json of a checkpoint, validated (format version, model config)."""
    file = resolve_checkpoint(path) / "config.json"
    try:
        config = json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(config, dict) or "model" not in config:
        raise ValueError(f"{file}: no 'model' section")
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{file}: format_version {config.get('format_version')!r}, expected {FORMAT_VERSION}")
    if isinstance(config["model"], dict):
        config["model"].setdefault("attention_bias", True)  # written before it existed, when every projection had one
        # Written before these fields existed, when every model had sinusoids and d_k = d_model / n_heads.
        config["model"].setdefault("positional", "sinusoidal")
        config["model"].setdefault("d_k", None)
        # Every other field is written by every save: a missing one would silently take its default, and
        # a model trained with 4 heads rebuilt with 8 (the weights' shapes the same) translates worse.
        missing = sorted({f.name for f in dataclasses.fields(ModelConfig)} - set(config["model"]))
        if missing:
            raise ValueError(f"{file}: the model section lacks {', '.join(missing)}")
    try:
        ModelConfig.from_dict(config["model"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{file}: {exc}") from None
    return config


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> ModelBundle:
    """Model (eval mode, float32), tokenizer and config.json of a checkpoint directory; device is
    a torch.device or a name as resolve_device takes it ("auto", "cpu", "cuda:1")."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a name such as \"cpu\" or \"cuda:1\", or a torch.device; got {device!r}")
    device = resolve_device(device) if isinstance(device, str) else device
    path = resolve_checkpoint(path)
    config = read_config(path)
    model_config = ModelConfig.from_dict(config["model"])
    tokenizer = Tokenizer.load(path / "tokenizer.json")
    target = Tokenizer.load(path / TARGET_TOKENIZER) if (path / TARGET_TOKENIZER).exists() else None
    if target is None and not model_config.shared_vocab:
        raise ValueError(f"{path} is not a whole checkpoint: its model has separate source and target vocabularies "
                         f"(shared_vocab false) but {TARGET_TOKENIZER} is missing")
    check_tokenizer_fits(tokenizer, model_config, str(path / "tokenizer.json"), target, str(path / TARGET_TOKENIZER))
    stored, source = _stored_tensors(path), _weights_source(path)
    _check_size(model_config, stored, source)
    model = Transformer(model_config)
    _check_names_and_shapes(model, stored, source)
    _load_weights(model, stored)
    info = {k: v for k, v in config.items() if k not in ("format_version", "model")}
    return ModelBundle(model.to(device).eval(), tokenizer, info, path, target)


def _weights_source(path: Path) -> Path:
    """The file that says which tensors the checkpoint holds: model.safetensors, or a sharded one's index."""
    return path / WEIGHTS_INDEX if (path / WEIGHTS_INDEX).exists() else path / WEIGHTS


def _stored_tensors(path: Path) -> dict[str, tuple[Path, list[int]]]:
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
    stored: dict[str, tuple[Path, list[int]]] = {}
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


def _check_index_matches(index: Path, weight_map: dict[str, str], stored: dict[str, tuple[Path, list[int]]]
                         ) -> None:
    """Each tensor in the shard the index names, and none stored that the index leaves out."""
    for name, shard in weight_map.items():
        if name not in stored:
            raise ValueError(f"{index}: {name} is missing: the index puts it in {shard}, which does not hold it")
        if stored[name][0].name != shard:
            raise ValueError(f"{index}: {name} is in {stored[name][0].name}, not in {shard} as the index says")
    unlisted = sorted(set(stored) - set(weight_map))
    if unlisted:
        raise ValueError(f"{index} does not list {', '.join(unlisted[:3])}, stored in {stored[unlisted[0]][0].name}")


def _header(file: Path) -> dict[str, tuple[Path, list[int]]]:
    """Each tensor of one safetensors file with its shape, read from the header alone."""
    try:
        with safe_open(str(file), "pt") as f:
            return {name: (file, f.get_slice(name).get_shape()) for name in f.keys()}
    except (SafetensorError, OSError) as exc:
        raise ValueError(f"{file}: not a readable safetensors file ({exc})") from None


def _check_size(config: ModelConfig, stored: dict[str, tuple[Path, list[int]]], source: Path) -> None:
    """Refuse, before allocating anything, a config.json that asks for far more than the weights
    hold: a 1 KB config (say, an uploaded one) could otherwise demand terabytes. The floor counts
    only the weight matrices, so every real model passes."""
    values = sum(math.prod(shape) for _, shape in stored.values())
    d, ff, qk = config.d_model, config.d_ff, config.n_heads * config.key_size
    attention = 2 * d * qk + 2 * d * d
    floor = ((config.src_vocab_size + (0 if config.shared_vocab else config.tgt_vocab_size)) * d
             + config.encoder_layers * (attention + 2 * d * ff) + config.decoder_layers * (2 * attention + 2 * d * ff))
    if floor > values:
        holder = "its shards hold" if source.name == WEIGHTS_INDEX else "the file holds"
        raise ValueError(f"{source} does not match config.json: the config describes at least {floor:,} parameters, "
                         f"{holder} {values:,} values")


def _check_names_and_shapes(model: Transformer, stored: dict[str, tuple[Path, list[int]]], source: Path) -> None:
    """The stored tensors are the model's, each of its shape: anything else means another model's weights."""
    expected = {name: tuple(tensor.shape) for name, tensor in _unique_state(model, None).items()}
    missing = sorted(set(expected) - set(stored))
    unexpected = sorted(set(stored) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{source} does not match config.json: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, (file, shape) in stored.items():
        if tuple(shape) != expected[name]:
            raise ValueError(f"{file}: {name} has shape {tuple(shape)}, config.json implies {expected[name]}")


def _load_weights(model: Transformer, stored: dict[str, tuple[Path, list[int]]]) -> None:
    """Read the tensors of every file in stored into model (their names and shapes checked already)."""
    state = {}
    for file in sorted({file for file, _ in stored.values()}):
        try:
            state.update(load_file(str(file)))
        except (SafetensorError, OSError) as exc:
            raise ValueError(f"{file}: not a readable safetensors file ({exc})") from None
    broken = [name for name, tensor in state.items() if tensor.is_floating_point() and not tensor.isfinite().all()]
    if broken:  # a run that diverged saves NaNs; loading them would translate every sentence into nothing
        raise ValueError(f"{stored[broken[0]][0]}: {len(broken)} weight tensor(s) hold NaN or infinite values "
                         f"({', '.join(broken[:3])}); "
                         f"the training that wrote it diverged: use an earlier checkpoint")
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=False)


def average_checkpoints(bundles: Sequence[ModelBundle]) -> ModelBundle:
    """Section 6.1: "a single model obtained by averaging the last 5 checkpoints". The element-wise
    mean of the bundles' weights (all of one model config), each tied matrix averaged once; the
    tokenizer and info of the last bundle, less its metrics (they measured that checkpoint, not the
    average), and no path: saving it must go to a folder of its own."""
    if not bundles:
        raise ValueError("no checkpoints to average")
    first = bundles[0]
    config, vocabulary = first.model.config, _vocabularies(first)
    for bundle in bundles[1:]:
        if bundle.model.config != config:
            theirs, ours = bundle.model.config.to_dict(), config.to_dict()
            fields = ", ".join(f"{k} {theirs[k]} (not {ours[k]})" for k in ours if theirs[k] != ours[k])
            raise ValueError(f"{bundle.path or bundle.name} has a different model config from "
                             f"{first.path or first.name}: {fields}; cannot average")
        if _vocabularies(bundle) != vocabulary:  # same shapes, other token ids: the mean would be noise
            raise ValueError(f"{bundle.path or bundle.name} has a different tokenizer (vocabulary) from "
                             f"{first.path or first.name}; only checkpoints of one run can be averaged")
    states = [_unique_state(b.model, None) for b in bundles]
    # A fresh dict of means before anything is written: the tied matrix appears under three
    # names in a state_dict, and averaging into a model's own tensors would mix it three times.
    mean = {name: sum(s[name].float() for s in states) / len(states) for name in states[0]}
    model = Transformer(config)
    model.load_state_dict(mean, strict=False)  # the tied names left out share the one tensor loaded
    last = bundles[-1]
    info = {key: value for key, value in last.info.items() if key != "metrics"}
    return ModelBundle(model.eval(), last.tokenizer, info, separate_target=last.separate_target)


def _vocabularies(bundle: ModelBundle) -> tuple[str, str]:
    return bundle.tokenizer.to_json(), bundle.target_tokenizer.to_json()


def load_trainer_state(path: str | Path) -> dict[str, Any] | None:
    """The trainer state saved beside the weights, or None; never unpickles arbitrary objects."""
    file = resolve_checkpoint(path) / TRAINER_STATE
    if not file.exists():
        return None
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # Its message says so when it met a class or function; but a pickle of protocol 4 or more that is
        # not in torch.save's zip gets "Unsupported operand" for its framing, whatever it holds: look inside.
        names_code = bool(NAMES_CODE.search(str(exc))) or (not zipfile.is_zipfile(file)
                                                          and _pickle_names_code(file.read_bytes()))
        if names_code:  # loading would call a class or function: code could run, so never load it
            raise ValueError(f"{file}: refused to load: it holds objects other than tensors and plain "
                             f"values") from None
        damage = exc
    except Exception as exc:  # RuntimeError, EOFError...: a truncated or damaged file
        damage = exc
    raise ValueError(f"{file} is damaged or truncated ({type(damage).__name__}); resume from an earlier "
                     f"checkpoint") from None


def _pickle_names_code(data: bytes) -> bool:
    """Whether pickles laid end to end (torch.save's old format writes several) name a class or function
    (which unpickling would call), read without running them."""
    stream = io.BytesIO(data)
    try:
        while stream.tell() < len(data):
            if any(opcode.name in CODE_OPCODES for opcode, _, _ in pickletools.genops(stream)):
                return True
    except Exception:  # the bytes stop being a pickle: whatever came before named no code
        pass
    return False
