"""Serving before the live training run: while requests are being served the training thread waits between its
steps (``Priority.yield_to_requests``), for at most YIELD_FACTOR times the length of its last step: training keeps
a share of the time, serving first. Every decoding request (batching.py) and every piece of heavy work (slots.py)
counts itself in ``PRIORITY.serving()``; studio/train/job.py yields between its steps."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

# Training waits for serving at most this many times its last step's length (it already runs at nice 10):
# at 3, a class of 50 left it 11% of its idle pace (9.9 -> 1.1 steps/s); the issue asks for 25%.
YIELD_FACTOR = 1.0
MAX_YIELD_S = 2.0  # and never longer than this between two steps


class Priority:
    """Counts the requests being served; the training thread waits between steps while there are any."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._busy = 0
        self._resumed = time.monotonic()  # when the training thread last went back to work

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._idle:
            self._busy += 1
        try:
            yield
        finally:
            with self._idle:
                self._busy -= 1
                if not self._busy:
                    self._idle.notify_all()

    def yield_to_requests(self) -> float:
        """Called by the training thread between steps: wait while requests are served, at most
        YIELD_FACTOR × the last step's length (MAX_YIELD_S at most); returns the seconds waited."""
        began = time.monotonic()
        limit = min(MAX_YIELD_S, YIELD_FACTOR * (began - self._resumed))
        with self._idle:
            self._idle.wait_for(lambda: not self._busy, timeout=limit)
        self._resumed = time.monotonic()
        return self._resumed - began


PRIORITY = Priority()
