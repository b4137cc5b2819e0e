"""Saving a model with its tokenizers and card as a checkpoint folder, atomically (atomic.py): the
weights in one file or shards (shards.py), config.json, the tokenizers, and optionally the trainer
state for an exact resume (trainer_state.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from ..bundle import ModelBundle, check_tokenizer_fits
from .atomic import replacing
from .layout import FORMAT_VERSION, TARGET_TOKENIZER
from .shards import MAX_SHARD_BYTES, unique_state, write_weights
from .trainer_state import save_trainer_state


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
    with replacing(path) as tmp:
        weights = write_weights(tmp, unique_state(bundle.model, torch.float16 if half else None), max_shard_bytes)
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
            save_trainer_state(tmp, trainer_state)
    return path
