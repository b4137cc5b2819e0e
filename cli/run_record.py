"""run.json, the record a run folder keeps of how it was trained: the options given, as typed (what
`train --resume` goes on with), every option's value (what --resume's checks compare) and a fingerprint of the
training and validation pairs. This module alone reads and writes it."""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

RUN_RECORD = "run.json"
NOT_OPTIONS = ("help", "out", "resume")  # train's options that say where and whether, not how, a run trains


def run_record(out: Path) -> dict:
    """The run.json of the run folder out ({} when missing or unreadable: nothing to compare with)."""
    try:
        record = json.loads((out / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def saved_options(out: Path) -> list[str]:
    """The options the run in out was started with, as typed; none for a run folder from before run.json kept
    them, and none, with a note, for a run.json that cannot be read (the options given are then all there is)."""
    if not out.is_dir():
        return []  # command_train names what --out is instead
    record = out / RUN_RECORD
    try:
        return json.loads(record.read_text())["options"]
    except (FileNotFoundError, KeyError):
        return []
    except (OSError, ValueError, TypeError) as exc:
        print(f"note: {record} cannot be read ({type(exc).__name__}: {exc}); resuming with the options given "
              f"here only", file=sys.stderr)
        return []


def saved_values(train: argparse.ArgumentParser, out: Path) -> dict[str, Any]:
    """The options the run in out was started with, by dest, as train's parser reads them."""
    options = saved_options(out)
    if not options:
        return {}
    parsed = vars(train.parse_args([*options, "--out", str(out)]))
    return {dest: value for dest, value in parsed.items()
            if dest not in NOT_OPTIONS and value != train.get_default(dest)}


def typed_options(train: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The train options that args holds, as they would be typed, defaults left out."""
    options = []
    for action in train._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or action.dest in NOT_OPTIONS or value == action.default:
            continue
        options += [action.option_strings[0]] if value is True else [action.option_strings[0], str(value)]
    return options


def write_run_record(train: argparse.ArgumentParser, args: argparse.Namespace, fingerprint: str) -> None:
    """run.json in args.out: the options given (for --resume), every value and the data's fingerprint."""
    args.out.mkdir(parents=True, exist_ok=True)
    values = {k: str(v) for k, v in vars(args).items() if k != "from_run"}
    record = {"options": typed_options(train, args), **values, "data_fingerprint": fingerprint}
    (args.out / RUN_RECORD).write_text(json.dumps(record, indent=2))


def data_fingerprint(corpus) -> str:
    """A digest of the training and validation pairs, which run.json keeps: --resume with data that has
    moved reads the same pairs (taken), another corpus or task does not (refused)."""
    digest = hashlib.sha256()
    for src, tgt in corpus.train + corpus.valid:
        digest.update(f"{src}\t{tgt}\n".encode())
    return digest.hexdigest()[:16]
