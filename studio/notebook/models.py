"""The model a notebook view is about, given as the notebook has it: a bundle (``core.load_checkpoint``'s), a
checkpoint folder, a run folder (``train_cli.py train --out``'s: its newest checkpoint), or a run trained in a cell
above (``studio.notebook.train``'s)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint


class Trained(Protocol):
    """A run trained in a notebook (studio.notebook.train's Run): its newest weights."""

    @property
    def bundle(self) -> ModelBundle: ...


Model = ModelBundle | str | Path | Trained
STEP = re.compile(r"step-(\d+)")
_LOADED: dict[tuple[Path, float], ModelBundle] = {}


def newest_checkpoint(folder: Path) -> Path | None:
    """A run folder's newest checkpoint: its highest step-NNNNNNN/, else final/ (None when it has neither)."""
    steps = [(int(m.group(1)), p) for p in folder.glob("step-*") if (m := STEP.fullmatch(p.name))
             and (p / "config.json").is_file()]
    if steps:
        return max(steps)[1]
    final = folder / "final"
    return final if (final / "config.json").is_file() else None


def checkpoint_folder(path: str | Path) -> Path:
    """The checkpoint a path names: itself, or a run folder's newest; FileNotFoundError says what is there."""
    folder = Path(path).expanduser()
    if (folder / "config.json").is_file():
        return folder
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (a checkpoint folder, with config.json, or a run folder "
                                f"of train_cli.py train --out)")
    newest = newest_checkpoint(folder)
    if newest is None:
        raise FileNotFoundError(f"{folder} is neither a checkpoint (no config.json) nor a run folder with one "
                                f"(no step-NNNNNNN/ or final/ holding a config.json)")
    return newest


def bundle_of(model: Model) -> ModelBundle:
    """model as a ModelBundle; a folder is loaded once (again when its config.json changes)."""
    if isinstance(model, ModelBundle):
        return model
    if isinstance(model, (str, Path)):
        folder = checkpoint_folder(model).resolve()
        key = (folder, (folder / "config.json").stat().st_mtime)
        if key not in _LOADED:
            _LOADED[key] = load_checkpoint(folder)
        return _LOADED[key]
    bundle = getattr(model, "bundle", None)
    if isinstance(bundle, ModelBundle):
        return bundle
    raise TypeError(f"expected a model: a ModelBundle (core.load_checkpoint), a checkpoint or run folder, or a run "
                    f"trained here (studio.notebook.train); got {type(model).__name__}")
