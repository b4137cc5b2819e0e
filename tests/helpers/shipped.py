"""The checkpoints the repository ships (checkpoints/), for the tests that read them; tests/conftest.py's
`shipped` and `numbers` fixtures load the two the tests use most."""
from __future__ import annotations

from pathlib import Path

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
SHIPPED = CHECKPOINTS / "multi30k-de-en-small"  # German→English, Multi30k
NUMBERS = CHECKPOINTS / "numbers-en-de-tiny"  # the synthetic numbers task, English words → German
