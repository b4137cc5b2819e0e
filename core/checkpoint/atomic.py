"""A checkpoint folder that is complete or absent, never half-written: a save or a copy fills a hidden
sibling folder, fsyncs it, then renames it into place; a crash at any moment leaves the previous
checkpoint loadable (loading.resolve_checkpoint falls back to its copy when a crash came between the
two renames)."""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import threading
from pathlib import Path
from typing import Iterator

from .layout import checkpoint_files, is_checkpoint_file

# One save at a time per process: two threads saving to one path (the studio's Save clicked twice,
# a run's periodic save) would share the hidden .saving-PID folder and delete each other's files.
_SAVING = threading.Lock()


def backup_of(path: Path) -> Path:
    """Where the previous checkpoint at path waits while the new one is renamed into place."""
    return path.with_name(f".{path.name}.previous")


def copy_checkpoint(source: str | Path, path: str | Path) -> Path:
    """Copy the checkpoint folder source to path as atomically as a save (a run's final/ from its
    last step-N): a copy cut short leaves the previous checkpoint at path, if any, unchanged."""
    source, path = Path(source), Path(path)
    with replacing(path) as tmp:
        for name in checkpoint_files(source):
            shutil.copy2(source / name, tmp / name)
    return path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A hidden sibling folder to fill with a checkpoint's files; once filled, it is fsynced and
    renamed into place. A failure (or Ctrl-C) while filling removes it and leaves path as it was."""
    with _SAVING:
        _check_replaceable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_saves(path)
        tmp = path.with_name(f".{path.name}.saving-{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        try:
            tmp.mkdir()
            yield tmp
            _fsync_dir(tmp)
            _swap_into_place(tmp, path)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError):  # disk full, read-only, quota: say what was kept
                raise OSError(exc.errno, f"saving checkpoint {path} failed ({exc.strerror or exc}); "
                                         f"the previous checkpoint there, if any, is unchanged") from exc
            raise


def _check_replaceable(path: Path) -> None:
    """A save replaces the directory at path whole, so it must hold nothing but a checkpoint's files:
    saving to a folder of runs or notes by mistake would otherwise delete them."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"cannot save a checkpoint to {path}: it is a file, not a directory")
    others = sorted(p.name for p in path.iterdir() if not is_checkpoint_file(p.name)) if path.exists() else []
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ValueError(f"cannot save a checkpoint to {path}: the folder holds other files ({shown}), "
                         f"which saving would delete; choose a new or empty folder")


def _remove_stale_saves(path: Path) -> None:
    """Delete the hidden .NAME.saving-PID folders of saves whose process died (kill -9, power
    loss): each can be as large as the checkpoint."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.saving-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _fsync_dir(path: Path) -> None:
    for file in path.iterdir():
        with open(file, "rb") as f:
            os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_into_place(tmp: Path, path: Path) -> None:
    backup = backup_of(path)
    if path.exists():
        if backup.exists():
            shutil.rmtree(backup)  # path is complete, so this copy is stale
        os.rename(path, backup)  # a crash right here is covered by load_checkpoint's fallback
    # When path is missing, backup is the only complete copy (an earlier save died between the
    # two renames): it is deleted only after the new checkpoint is in place.
    try:
        os.rename(tmp, path)
    except OSError:
        if backup.exists() and not path.exists():
            os.rename(backup, path)  # put the previous checkpoint back under its name
        raise
    _fsync_parent(path)
    shutil.rmtree(backup, ignore_errors=True)


def _fsync_parent(path: Path) -> None:
    """Make the renames durable (a power cut after a rename could otherwise undo it); best
    effort: some file systems cannot fsync a directory, and the checkpoint is in place already."""
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
