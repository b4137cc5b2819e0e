"""Writing the Train tab's checkpoints: folder names any script can spell, a folder never replaced,
and the .zip a visitor downloads. No Gradio here."""
from __future__ import annotations

import json
import re
import shutil
import unicodedata
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.bundle import ModelBundle
from core.checkpoint import TRAINER_STATE, checkpoint_files, save_checkpoint

from ..server import limits


def safe_name(text: str, fallback: str = "live-model") -> str:
    """A checkpoint folder name: letters of any script with their marks (Übung, हिन्दी, مُعَلِّم), digits,
    '.', '_' and '-'; everything else becomes '-'; no leading dot, nor two in a row; at most 120 bytes (a file name
    holds 255, and the folder's -stepN follows)."""
    def kept(ch: str) -> bool:  # a letter, mark or number; the joiners some scripts spell with
        return ch in "._-\u200c\u200d" or unicodedata.category(ch)[0] in "LMN"
    name = "".join(ch if kept(ch) else " " for ch in unicodedata.normalize("NFC", text or ""))
    name = "-".join(name.split())  # a run of anything else: one '-'
    name = re.sub(r"\.{2,}", ".", name)  # "my run/../x" is my-run-.-x: no ".." that reads as a path trick
    name = name.encode()[:120].decode("utf-8", "ignore").strip(".-")
    return name or fallback


def write_checkpoint(folder: Path, bundle: ModelBundle, base: str, info: dict[str, Any]) -> Path:
    """bundle saved as folder/BASE (BASE-2, BASE-3, ... when taken: nothing is replaced), its info
    updated with info and named after the folder, the name it has in the picker (its .zip opens under it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path, n = folder / base, 2
    while path.exists():
        path, n = folder / f"{base}-{n}", n + 1
    if path.resolve().parent != folder.resolve():
        raise ValueError(f"{base!r} is not a usable checkpoint name.")
    return save_checkpoint(path, replace(bundle, info={**bundle.info, **info, "name": path.name}))


def visitor_saves(folder: Path) -> list[Path]:
    """The checkpoints in folder that a public studio's visitors saved (limits.VISITOR_SAVE in config.json), oldest
    first; shipped checkpoints are never among them."""
    def marked(path: Path) -> bool:
        try:
            return json.loads((path / "config.json").read_text(encoding="utf-8")).get(limits.VISITOR_SAVE) is True
        except (OSError, ValueError, AttributeError):
            return False
    saves = [path for path in folder.iterdir() if path.is_dir() and marked(path)] if folder.is_dir() else []
    return sorted(saves, key=lambda path: path.stat().st_mtime)


def folder_bytes(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def make_room(folder: Path, incoming: int) -> list[Path]:
    """Remove the oldest visitor saves in folder until one more of incoming bytes keeps within
    limits.PUBLIC_MAX_SAVES and limits.PUBLIC_SAVES_MB; the folders removed, oldest first."""
    saves = visitor_saves(folder)
    sizes = [folder_bytes(path) for path in saves]
    removed = []
    while saves and (len(saves) + 1 > limits.PUBLIC_MAX_SAVES
                     or sum(sizes) + incoming > limits.PUBLIC_SAVES_MB * 2**20):
        oldest = saves.pop(0)
        sizes.pop(0)
        shutil.rmtree(oldest, ignore_errors=True)
        removed.append(oldest)
    return removed


def zip_checkpoint(folder: Path, downloads: Path) -> Path:
    """A .zip of a saved checkpoint (members NAME/config.json, ...) in downloads, the only one there:
    a Space visitor keeps the model, and the studio's "Open another checkpoint" takes it back."""
    for old in downloads.glob("*.zip"):
        old.unlink()
    target = downloads / f"{folder.name}.zip"
    files = [name for name in checkpoint_files(folder) if name != TRAINER_STATE]  # shards too; never a pickle
    try:
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in files:
                archive.write(folder / name, f"{folder.name}/{name}")
    except BaseException:
        target.unlink(missing_ok=True)  # never offer half a .zip
        raise
    return target
