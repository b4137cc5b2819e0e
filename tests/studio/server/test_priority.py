"""Serving before the live training run (studio/server/priority.py): training waits for requests, but not for
ever, and keeps making progress."""
from __future__ import annotations

import threading
import time

from studio.server.priority import MAX_YIELD_S, YIELD_FACTOR, Priority
from tests.helpers.waiting import wait_until


def test_training_waits_for_requests_but_not_for_ever():
    priority = Priority()
    assert priority.yield_to_requests() < 0.5  # nobody served: no wait
    priority._resumed = time.monotonic() - 0.1  # a 100 ms step: it waits at most YIELD_FACTOR times that
    with priority.serving():
        waited = priority.yield_to_requests()
    assert 0.09 * YIELD_FACTOR <= waited < MAX_YIELD_S  # held by a request, a while only
    priority._resumed = time.monotonic() - 10  # a long step: up to MAX_YIELD_S, unless serving ends first
    done: list[float] = []
    with priority.serving():
        trainer = threading.Thread(target=lambda: done.append(priority.yield_to_requests()))
        trainer.start()
        wait_until(lambda: priority._idle._waiters)  # the trainer is waiting
    trainer.join(10)
    assert done and done[0] < MAX_YIELD_S  # woken when the last request was answered
