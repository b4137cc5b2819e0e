"""The trainer state saved beside the weights (trainer.pt: optimizer, schedule, step, RNG), for an exact
resume; read with torch's weights-only unpickler only, and a pickle that names a class or function
(which unpickling would call, so it could run code) refused by name, told apart from a damaged file."""
from __future__ import annotations

import io
import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from .layout import TRAINER_STATE
from .loading import resolve_checkpoint

# What torch's weights-only unpickler says of a pickle that names a class or function (loading it would
# call them, so it could run code); of damaged bytes it says other things ("Unsupported operand 149").
NAMES_CODE = re.compile(r"GLOBAL|unrecognized function|Can only (create new object|build)")
CODE_OPCODES = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX", "BUILD"}


def save_trainer_state(folder: Path, state: dict[str, Any]) -> None:
    """Write state as folder's trainer.pt (torch.save's zip of tensors and plain values)."""
    torch.save(state, folder / TRAINER_STATE)


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
