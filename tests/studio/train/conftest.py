"""What the Train tab's tests share: a training job of their own, saving under the test's temporary folder, and
few validation sentences."""
from __future__ import annotations

import pytest

from studio.server.registry import ModelRegistry
from studio.train import setup as run_setup
from studio.train.job import TrainingJob


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
