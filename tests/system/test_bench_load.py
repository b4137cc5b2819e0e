"""bench/load.py drives the studio through its API (/translate, /attention, /beam_run, /train_start,
/train_status, /train_stop), so a change to those endpoints' inputs must fail a test rather than the benchmark
whose figures the README reports (it once sent /train_view a checkbox the tab no longer had)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
@pytest.mark.parametrize("driver", ["http", "async"])
def test_the_load_benchmark_runs_against_the_studio_it_measures(tmp_path, driver):
    checkpoints = tmp_path / "checkpoints"  # the studio it starts may save its training run there
    shutil.copytree(ROOT / "checkpoints" / "numbers-en-de-tiny", checkpoints / "numbers-en-de-tiny")
    done = subprocess.run([sys.executable, "bench/load.py", "--seconds", "2", "--clients", "3", "--driver", driver,
                           "--train-sample", "1", "--checkpoints-dir", str(checkpoints), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["errors"] == 0 and figures["served"] > 0 and figures["connected"] == 3
    assert set(figures["served_by_kind"]) <= {"translate", "attention", "beam"} and figures["rss_after_mb"] > 0
    # The Train tab's run was read before the load (it had taken steps: a pace) and after it (its step count, which
    # never goes back); how many steps fit in 2 s depends on the machine's load, so only their sign is known.
    assert figures["training"] and figures["training_steps_per_s_before"] > 0
    assert isinstance(figures["training_steps_during_load"], int) and figures["training_steps_during_load"] >= 0
