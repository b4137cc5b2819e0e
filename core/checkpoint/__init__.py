"""Checkpoints: a folder that is complete or absent, never half-written, holding a model, its tokenizers
and card, and optionally the trainer's state. One module per job:

    layout.py         the folder's files, and which a checkpoint must hold
    atomic.py         a save or copy written beside the folder, then renamed into place
    shards.py         the weights as one model.safetensors or transformers' shards and index
    saving.py         save_checkpoint
    loading.py        load_checkpoint, refusing a folder that does not match itself
    averaging.py      section 6.1's average of the last checkpoints
    trainer_state.py  trainer.pt, read without unpickling code
"""
from .atomic import copy_checkpoint
from .averaging import average_checkpoints
from .layout import (
    FILES,
    OPTIONAL_FILES,
    SHARD_NAME,
    TRAINER_STATE,
    WEIGHTS,
    WEIGHTS_INDEX,
    checkpoint_files,
    is_checkpoint_file,
    missing_files,
)
from .loading import load_checkpoint, read_config
from .saving import save_checkpoint
from .trainer_state import load_trainer_state

__all__ = ["FILES", "OPTIONAL_FILES", "SHARD_NAME", "TRAINER_STATE", "WEIGHTS", "WEIGHTS_INDEX",
           "average_checkpoints", "checkpoint_files", "copy_checkpoint", "is_checkpoint_file", "load_checkpoint",
           "load_trainer_state", "missing_files", "read_config", "save_checkpoint"]
