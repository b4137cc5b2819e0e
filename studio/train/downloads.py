"""Saved checkpoints as .zip files to download (Save's "Download"): a Space visitor keeps the model, and the
studio's "Open another checkpoint" takes it back. The newest .zip alone is kept, in a temporary folder of
the process's own that is deleted when the studio exits (it stayed in /tmp, up to 200 MB a time)."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from .saving import zip_checkpoint


class Downloads:
    def __init__(self) -> None:
        self._folder: Path | None = None

    def zip_checkpoint(self, folder: Path) -> Path:
        """A .zip of a saved checkpoint folder (saving.zip_checkpoint), replacing the last one made."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="studio-downloads-"))
            atexit.register(self.clean)
        return zip_checkpoint(folder, self._folder)

    def clean(self) -> None:
        """Delete the folder and what it holds (at exit)."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
