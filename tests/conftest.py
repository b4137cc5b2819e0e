"""Shared test set-up: slow tests run only with --runslow; GPU tests only with CUDA;
tests that read ../shared/data skip when it is absent (a user's fresh clone); the shipped
checkpoints the tests use most (`shipped`, `numbers`), loaded once a module."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from tests.helpers.shipped import NUMBERS, SHIPPED

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The tests' models are tiny: one thread is as fast, and on a busy 2-core machine a second
# thread mostly spin-waits (measured 2-10x slower under load).
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
MULTI30K = SHARED_DATA / "multi30k"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    run_slow = config.getoption("--runslow") or "slow" in (config.getoption("-m") or "")
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --runslow"))
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs CUDA"))


@pytest.fixture
def multi30k() -> Path:
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"{MULTI30K} is absent")
    return MULTI30K


@pytest.fixture(scope="module")
def shipped():
    """The shipped German→English model (checkpoints/multi30k-de-en-small)."""
    from core.checkpoint import load_checkpoint

    return load_checkpoint(SHIPPED)


@pytest.fixture(scope="module")
def numbers():
    """The shipped model of the synthetic numbers task (checkpoints/numbers-en-de-tiny)."""
    from core.checkpoint import load_checkpoint

    return load_checkpoint(NUMBERS)
