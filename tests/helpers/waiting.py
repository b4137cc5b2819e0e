"""Waiting in a test for something another thread does: on a condition, never on a fixed sleep."""
from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout: float = 30.0) -> float:
    """Seconds until predicate() held; TimeoutError past timeout."""
    began = time.monotonic()
    while not predicate():
        if time.monotonic() - began > timeout:
            raise TimeoutError("condition not reached")
        time.sleep(0.005)
    return time.monotonic() - began
