"""Issue 66: train's loop stops on SIGTERM (what `timeout`, a Space's restart and a cluster's preemption send) as
it does on Ctrl-C, saving first, and a log without a progress bar shows a run's first step at once; a run stopped
in-process (a notebook's cell) gives the signal handlers back."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cli.common
import cli.loop
import train_cli

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


def test_a_run_stopped_in_process_gives_ctrl_c_back(tmp_path, capsys):
    """A notebook's train_cli.main() stopped with the kernel's button: its run saved, and the next press is the
    kernel's again (the handlers stayed ignored once, and a later cell's Stop did nothing)."""
    out, before = tmp_path / "run", signal.getsignal(signal.SIGINT)

    def press_once_it_trains() -> None:
        deadline = time.monotonic() + 120
        while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().count("\n") >= 2):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        signal.raise_signal(signal.SIGINT)
    threading.Thread(target=press_once_it_trains, daemon=True).start()
    with pytest.raises(SystemExit) as stopped:
        train_cli.main([*TRAIN, "--out", str(out)])
    assert stopped.value.code == 128 + signal.SIGINT and cli.common.run_checkpoints(out)
    assert signal.getsignal(signal.SIGINT) is before and signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN


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
