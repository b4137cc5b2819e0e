"""Issue 66: train's loop stops on SIGTERM (what `timeout`, a Space's restart and a cluster's preemption send) as
it does on Ctrl-C, saving first, and a log without a progress bar shows a run's first step at once."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import cli.common
import cli.loop

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["train", "--data", "synthetic:copy", "--preset", "tiny", "--max-tokens", "512", "--warmup", "10",
         "--eval-every", "0", "--limit", "200", "--max-steps", "100000"]


def test_sigterm_saves_the_run_as_ctrl_c_does_and_it_resumes(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train_cli.py"), *TRAIN, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().count("\n") >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM): saving a checkpoint first" in err and "Traceback" not in err
    latest = cli.common.run_checkpoints(out)[-1]
    assert (out / "final" / "model.safetensors").read_bytes() == (latest / "model.safetensors").read_bytes()
    assert "step 1/100000: loss " in stdout  # a log's first line at the first step, not the 100th
    step = int(latest.name.removeprefix(cli.common.CHECKPOINT_PREFIX))
    resumed = subprocess.run([sys.executable, str(ROOT / "train_cli.py"), "train", "--out", str(out), "--resume",
                              "--max-steps", str(step + 1)], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0 and (out / cli.loop.checkpoint_name(step + 1)).is_dir(), resumed.stderr


def test_a_plain_log_prints_the_first_step_then_every_100_steps_or_minute(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(cli.loop.time, "monotonic", lambda: clock[0])
    log = cli.loop.PlainLog(max_steps=250)
    assert [step for step in range(1, 251) if log.due(step)] == [1, 100, 200, 250]
    log = cli.loop.PlainLog(max_steps=250)
    due = []
    for step in range(1, 8):  # steps of 25 s: a line a minute
        due.append(log.due(step))
        clock[0] += 25
    assert due == [True, False, False, True, False, False, True]
