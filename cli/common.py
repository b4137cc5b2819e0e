"""What every command shares: the one-line refusal, checked number options, run folders and loading a
checkpoint the user named."""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from core.bundle import resolve_device
from core.checkpoint import load_checkpoint
from core.model.config import INT64_MAX

from .run_record import RUN_RECORD

# German is translated by the general model (Tatoeba's everyday sentences and Multi30k's captions, both ways):
# the caption model, checkpoints/multi30k-de-en-small, knows Flickr photos only.
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "checkpoints" / "tatoeba-de-en"

CHECKPOINT_PREFIX = "step-"

PROG = "train_cli.py"


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def refusal(message: str, command: str) -> str:
    """One style for every refusal, argparse's or a command's: what was wrong, and where the options are
    listed when an option was (core's checks of --beam 0 and --top-p 1.5 read as argparse's do)."""
    prog = f"{PROG} {command.strip()}".strip()
    options = (message.startswith(("argument ", "unrecognized arguments", "the following arguments", "-"))
               and not re.match(r"argument \d+:", message))  # a sentence given as an argument, not an option
    hint = f"\n(`{prog} --help` lists every option)" if options else ""
    return f"{prog}: error: {message}{hint}"


def in_words(exc: Exception) -> str:
    """An exception's message; an OSError's without Python's "[Errno N]", naming its file where it has one."""
    if not isinstance(exc, OSError) or exc.strerror is None:
        return str(exc)
    return f"{exc.filename}: {exc.strerror}" if exc.filename is not None else exc.strerror


def number(kind: type, rule: str, ok):
    """An argparse type: a `kind` (int or float) for which ok(value) holds, else the rule in words."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}") from None
        if not (math.isfinite(value) and ok(value)):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value
    return parse

POSITIVE_INT = number(int, "an integer >= 1", lambda v: v >= 1)


NON_NEGATIVE_INT = number(int, "an integer >= 0", lambda v: v >= 0)


POSITIVE_NUMBER = number(float, "a number > 0", lambda v: v > 0)


NON_NEGATIVE_NUMBER = number(float, "a number >= 0", lambda v: v >= 0)


SEED = number(int, "an integer from 0 to 2**63 - 1", lambda v: 0 <= v <= INT64_MAX)  # what torch.manual_seed takes


def device_name(text: str) -> str:
    """An argparse type: auto, or a device this machine has (refused with the option's name)."""
    if text == "auto":
        return text
    try:
        resolve_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def run_checkpoints(run: Path) -> list[Path]:
    """The step-NNNNNNN checkpoints of a run, oldest first."""
    return sorted(p for p in run.glob(f"{CHECKPOINT_PREFIX}*") if p.is_dir() and (p / "config.json").exists())


def check_creatable(out: Path) -> None:
    """Refuse a folder that cannot be made (a file on its path, no write access) before any work."""
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"cannot create {out}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise CLIError(f"cannot create {out}: {parent} is not writable")


def load_bundle(path: Path, device: str):
    if (path / RUN_RECORD).is_file() and not (path / "config.json").exists():  # a run folder, not a checkpoint
        inside = [p for p in [path / "final", path / "best", *run_checkpoints(path)[::-1]]
                  if (p / "config.json").is_file()]
        raise CLIError(f"{path} is a training run's folder, not a checkpoint; its checkpoints (final, best, then "
                       f"the latest first): "
                       f"{', '.join(map(str, inside[:3])) or 'none yet'}")
    return load_checkpoint(path, device)
