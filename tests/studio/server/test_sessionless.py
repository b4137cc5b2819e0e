"""Issue 67: on a public studio, heavy calls that name no session take turns as one visitor (one at a time, at most
SESSION_REQUESTS in flight), so they can neither outnumber the page sessions nor step around the per-session limit;
a private studio gives them no turns."""
from __future__ import annotations

from studio.server import limits, slots
from tests.studio.server.test_abuse import Asks, wait_until


def test_calls_without_a_session_take_turns_as_one_visitor():
    asks = Asks(slots.Slots(2, long_at_once=2))
    names = [f"n{i}" for i in range(limits.SESSION_REQUESTS)]
    for name in names:
        asks.ask(name, None)
    assert asks.running == ["n0"] and asks.waiting() == limits.SESSION_REQUESTS - 1
    asks.ask("one too many", None)
    assert asks.refused["one too many"].startswith(f"Calls without a session already have "
                                                   f"{limits.SESSION_REQUESTS} requests running or waiting")
    asks.ask("page", "A")  # a page's request takes the second slot at once
    wait_until(lambda: asks.running == ["n0", "page"])
    asks.release("page", *names)
    local = Asks(slots.Slots(2), public=False)
    local.ask("x", None)
    local.ask("y", None)
    assert local.running == ["x", "y"]
    local.release("x", "y")
