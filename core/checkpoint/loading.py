"""Reading a checkpoint back, refusing by name whatever does not match itself: a missing file, a config
of another format or lacking fields, weights of other names or shapes than the config implies, a config
asking for far more than the weights hold, weights that hold NaN."""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..bundle import ModelBundle, check_tokenizer_fits, resolve_device
from ..data.tokenizer import Tokenizer
from ..model.config import ModelConfig
from ..model.transformer import Transformer
from .atomic import backup_of
from .layout import FILES, FORMAT_VERSION, TARGET_TOKENIZER, WEIGHTS_INDEX, missing_files
from .shards import Stored, stored_tensors, unique_state, weights_source


def resolve_checkpoint(path: str | Path) -> Path:
    """The directory to read: path, or the previous copy if a save died mid-swap."""
    path = Path(path)
    if not path.exists() and backup_of(path).is_dir():
        warnings.warn(f"{path} is missing (interrupted save); using the previous copy {backup_of(path)}",
                      stacklevel=2)
        return backup_of(path)
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
    stored, source = stored_tensors(path), weights_source(path)
    _check_size(model_config, stored, source)
    model = Transformer(model_config)
    _check_names_and_shapes(model, stored, source)
    _load_weights(model, stored)
    info = {k: v for k, v in config.items() if k not in ("format_version", "model")}
    return ModelBundle(model.to(device).eval(), tokenizer, info, path, target)


def _check_size(config: ModelConfig, stored: Stored, source: Path) -> None:
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


def _check_names_and_shapes(model: Transformer, stored: Stored, source: Path) -> None:
    """The stored tensors are the model's, each of its shape: anything else means another model's weights."""
    expected = {name: tuple(tensor.shape) for name, tensor in unique_state(model, None).items()}
    missing = sorted(set(expected) - set(stored))
    unexpected = sorted(set(stored) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{source} does not match config.json: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, (file, shape) in stored.items():
        if tuple(shape) != expected[name]:
            raise ValueError(f"{file}: {name} has shape {tuple(shape)}, config.json implies {expected[name]}")


def _load_weights(model: Transformer, stored: Stored) -> None:
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
