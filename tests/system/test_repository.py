"""Issue #52: the repository deploys to a Hugging Face Space by a plain `git push`, and a Space refuses
any file over 10 MiB that is not in Git LFS, so no file git tracks (or would add) may be larger."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_BYTES = 10 * 10**6  # 10 MB: a little under the Space's 10 MiB, so that neither reading fails


def committable_files() -> list[Path]:
    """The files a commit of the working tree would hold: tracked ones still on disk, and new ones that
    .gitignore does not exclude (a re-saved checkpoint's shards before they are added)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    return [ROOT / name for name in listed if name and (ROOT / name).is_file()]


def test_no_file_in_the_repository_is_over_10_mb():
    files = committable_files()
    too_large = {str(f.relative_to(ROOT)): f"{f.lstat().st_size / 10**6:.1f} MB" for f in files
                 if f.lstat().st_size > MAX_FILE_BYTES}
    assert files and not too_large, f"a Space refuses these in plain git (shard weights: core.checkpoint): {too_large}"
