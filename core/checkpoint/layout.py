"""A checkpoint folder's files, and which of them a folder must hold:

    model.safetensors   weights (no pickle; tied matrices stored once); above max_shard_bytes (9 MB, so
                        that a Hugging Face Space takes every file in plain git) split as transformers
                        splits them: model-00001-of-0000N.safetensors files and
                        model.safetensors.index.json, which names each tensor's file (shards.py)
    config.json         format version, model config, training setup, data, metrics
    tokenizer.json      the vocabulary (Hugging Face tokenizers): both languages' (section 3.4), or
                        with separate vocabularies the source's
    target_tokenizer.json  separate vocabularies only: the target's
    trainer.pt          optional: optimizer, schedule, step, RNG, for exact resume;
                        read with torch.load(weights_only=True) only (trainer_state.py)
"""
from __future__ import annotations

import re
from pathlib import Path

FORMAT_VERSION = 1
WEIGHTS = "model.safetensors"
# A sharded checkpoint has the index and its shards in place of WEIGHTS, named as transformers names them.
WEIGHTS_INDEX = "model.safetensors.index.json"
SHARD_NAME = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
FILES = (WEIGHTS, "config.json", "tokenizer.json")
TARGET_TOKENIZER = "target_tokenizer.json"
TRAINER_STATE = "trainer.pt"
OPTIONAL_FILES = (TRAINER_STATE, TARGET_TOKENIZER)


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
