"""Writing the Train tab's checkpoints: folder names any script can spell, a folder never replaced,
and the .zip a visitor downloads. No Gradio here."""
from __future__ import annotations

import re
import unicodedata
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.bundle import ModelBundle
from core.checkpoint import TRAINER_STATE, checkpoint_files, save_checkpoint


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
