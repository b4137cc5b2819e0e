"""`train --warm-start`: a new run goes on from a checkpoint whose trainer state is lost (a shipped or averaged
model): the schedule taken up at its step, Adam's new moments gathered at rate 0, the rate ramped back in over
REWARM_STEPS, and only from a checkpoint of the same model, vocabulary and data split."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import train_cli
from core.training.schedule import learning_rate
from core.training.trainer import GATHER_STEPS, REWARM_STEPS
from tests.helpers.cli import one_line_error

TRAIN = ["train", "--data", "synthetic:copy", "--preset", "tiny", "--max-steps", "20", "--max-tokens", "512",
         "--warmup", "10", "--eval-every", "0", "--save-every", "10", "--keep-last", "2", "--limit", "300"]


def eq3(step: int) -> float:
    """The run's rate without a warm start: eq. 3 with the tiny model's d_model and a warm-up of 10."""
    return learning_rate(step, schedule="noam", d_model=64, warmup=10, factor=1.0, peak_lr=0.0)


@pytest.fixture(scope="module")
def averaged(tmp_path_factory) -> Path:
    """A run's last two checkpoints averaged: weights and a step, no trainer state."""
    folder = tmp_path_factory.mktemp("warm")
    assert train_cli.main(TRAIN + ["--out", str(folder / "run")]) == 0
    assert train_cli.main(["average", "--run", str(folder / "run"), "--last", "2", "--out", str(folder / "avg")]) == 0
    return folder / "avg"


def test_a_warm_start_takes_the_schedule_up_at_the_checkpoints_step_and_ramps_the_rate_in(averaged, tmp_path):
    out = tmp_path / "more"
    last = 20 + GATHER_STEPS + 10
    assert train_cli.main(TRAIN + ["--max-steps", str(last), "--warm-start", str(averaged), "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    lr = {r["step"]: r["lr"] for r in records if "lr" in r}
    assert min(lr) == 21 and max(lr) == last  # on from the checkpoint's step 20
    assert all(lr[step] == 0 for step in range(21, 21 + GATHER_STEPS))  # new Adam moments gathered, nothing moved
    for step in (21 + GATHER_STEPS, 25 + GATHER_STEPS, last):  # eq. 3 at that step, times the ramp
        assert lr[step] == pytest.approx(eq3(step) * (step - 20 - GATHER_STEPS) / REWARM_STEPS)
    info = json.loads((out / f"step-{last:07d}" / "config.json").read_text())
    assert info["warm_started_from"] == {"checkpoint": str(averaged), "step": 20}
    # The new run resumes exactly (its own trainer state), still ramping.
    assert train_cli.main(["train", "--out", str(out), "--resume", "--max-steps", str(last + 2)]) == 0
    lr = {r["step"]: r["lr"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "lr" in r}
    assert lr[last + 1] == pytest.approx(eq3(last + 1) * 11 / REWARM_STEPS)


def test_a_warm_start_needs_the_checkpoints_model_split_and_step(averaged, capsys, tmp_path):
    out = str(tmp_path / "more")
    one_line_error(capsys, TRAIN + ["--max-steps", "30", "--warm-start", str(averaged), "--out", out,
                                    "--d-model", "32"], "different model config", "--d-model 64 (now 32)")
    one_line_error(capsys, TRAIN + ["--max-steps", "30", "--warm-start", str(averaged), "--out", out, "--limit", "200"],
                   "other data or another split", "counts")
    one_line_error(capsys, TRAIN + ["--warm-start", str(averaged), "--out", out], "already at step 20")
    one_line_error(capsys, TRAIN + ["--warm-start", str(tmp_path / "nothing"), "--out", out], "--warm-start")
    assert not (tmp_path / "more").exists() or not any((tmp_path / "more").glob("step-*"))
