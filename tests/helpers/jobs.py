"""Test helpers for the Train tab's job (studio.train.job): a quick lecture run, the job fixture, and waiting
on the job's state (never on a fixed sleep)."""
from __future__ import annotations

import time

import pytest

from studio.server.registry import ModelRegistry
from studio.train import job as training
from studio.train import setup as run_setup
from studio.train.job import Settings, TrainingJob

QUICK = Settings(max_steps=30, max_tokens=256, warmup=10, eval_every=10, attention_every=5)
ENDED = ("finished", "stopped", "failed")


@pytest.fixture(autouse=True)
def few_eval_sentences(monkeypatch):
    """Decoding 100 validation sentences with a barely trained model would dominate these tests."""
    monkeypatch.setattr(run_setup, "EVAL_SENTENCES", 10)


@pytest.fixture
def job(tmp_path):
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints")
    yield job
    if job.view().state in ("running", "paused"):
        job.stop()
    job.wait(300)


def wait_for(job: TrainingJob, predicate, timeout: float = 300.0) -> training.JobView:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = job.view()
        if predicate(view):
            return view
        time.sleep(0.02)
    raise TimeoutError(f"job still {job.view().state} at step {job.view().step}")
