"""Saved checkpoints as .zip files to download (Save's "Download"): a Space visitor keeps the model, and the
studio's "Open another checkpoint" takes it back. The newest .zip alone is kept, in a temporary folder of
the process's own that is deleted when the studio exits (it stayed in /tmp, up to 200 MB a time)."""
from __future__ import annotations

import atexit
import shutil
import tempfile
import zipfile
from pathlib import Path

from core.checkpoint import FILES as CHECKPOINT_FILES


class Downloads:
    def __init__(self) -> None:
        self._folder: Path | None = None

    def zip_checkpoint(self, folder: Path) -> Path:
        """A .zip of a saved checkpoint folder (members NAME/config.json, ...), replacing the last one made."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="studio-downloads-"))
            atexit.register(self.clean)
        for old in self._folder.glob("*.zip"):
            old.unlink()
        target = self._folder / f"{folder.name}.zip"
        try:
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
                for name in CHECKPOINT_FILES:
                    archive.write(folder / name, f"{folder.name}/{name}")
        except BaseException:
            target.unlink(missing_ok=True)  # never offer half a .zip
            raise
        return target

    def clean(self) -> None:
        """Delete the folder and what it holds (at exit)."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
