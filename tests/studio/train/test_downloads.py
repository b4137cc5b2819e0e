"""Saved checkpoints to download (studio/train/downloads.py): the newest .zip alone is kept, the studio opens it
again, and a full disk leaves the checkpoint saved with no half-written .zip offered."""
from __future__ import annotations

import zipfile
from dataclasses import replace

from core.checkpoint import FILES as CHECKPOINT_FILES
from studio.server.registry import ModelRegistry
from studio.server.uploads import open_checkpoint
from studio.train import tab
from tests.helpers.jobs import QUICK, same_output, wait_for


def test_a_saved_checkpoint_downloads_as_a_zip_the_studio_opens_again(job, monkeypatch):
    job.start(replace(QUICK, max_steps=5))
    wait_for(job, lambda v: v.state == "finished")
    first = job.zip_saved(job.save("first"))
    archive = job.zip_saved(job.save("second"))
    assert not first.exists()  # only the newest .zip is kept
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(f"second-step5/{name}" for name in CHECKPOINT_FILES)
    registry = ModelRegistry(None)
    picker, _ = open_checkpoint(registry, [str(archive)], None)
    assert picker.value == "second-step5"  # under its saved name, not the run's
    reopened = registry.get(picker.value)
    assert same_output(reopened, job.registry.get("second-step5"))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zipfile.ZipFile, "write", full_disk)
    message, picker, download = tab.save(job, "third", None)
    assert "Saved **third\\-step5**" in message and "No download" in message and "No space left" in message
    assert not download.visible and not list(archive.parent.glob("*.zip"))  # no half-written .zip offered
    assert "third-step5" in job.registry.names()  # the checkpoint itself was saved
