"""Heavy work (beam search, attention maps, saliency, compare; issue 55; translations, issue 67) in fair decoding
slots. A batch of translations (batching.py) takes one as a whole (``hold(..., batch=True)``), each of its requests
counted in its session's (``riding()``). Heavy work runs inside ``heavy()``: it takes one of the decoding slots
(``Slots``: short requests first, at most LONG_AT_ONCE long ones, and on a public studio one per session at a time)
and carries a ``Work``, which its loops ask whether to stop: its client has gone, or its deadline has passed. Gradio
only tells which session and event a callback serves (``this_event``).
"""
from __future__ import annotations

import functools
import itertools
import sys
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .guard import NotServed
from .limits import DECODE_CONCURRENCY, LONG_AT_ONCE, SESSION_REQUESTS, SHORT_WORK_S, Budget, budget_for
from .priority import PRIORITY

WAIT_CHECK_S = 0.25  # how often a request waiting for a slot looks whether its client is still there


@dataclass(frozen=True)
class Event:
    """The Gradio event a callback serves: its session (a browser tab, a script's Client; None outside Gradio),
    the app serving it, and whether its client is still connected."""

    session: str | None
    app: Any
    client_present: Callable[[], bool]


def this_event() -> Event:
    """The event this thread serves (Gradio sets its context in the worker thread before calling back). Where
    Gradio was never imported (a script's or a notebook's call of studio.numbers) no event can be under way: none,
    and Gradio stays unloaded."""
    if "gradio" not in sys.modules:
        return Event(None, None, lambda: True)
    from gradio.context import LocalContext

    app, request = LocalContext.blocks.get(None), LocalContext.request.get(None)
    return Event(getattr(request, "session_hash", None), app, _client_present(app, LocalContext.event_id.get(None)))


def _client_present(app: Any, event_id: str | None) -> Callable[[], bool]:
    """Whether the event's client still waits for it. Gradio 6 lets a running function go on when its client
    leaves: a closed stream marks the event dead (routes.queue_data_helper -> Queue.clean_events sets
    Event.alive), and a cancel (/cancel: the page's Stop, gradio_client's Job.cancel) ends the asyncio task that
    holds it in Queue.active_jobs. The loops ask this instead. Outside a queued event: always."""
    queue = getattr(app, "_queue", None)
    event = next((e for jobs in getattr(queue, "active_jobs", None) or () for e in jobs or ()
                  if event_id is not None and getattr(e, "_id", None) == event_id), None)
    if event is None:
        return lambda: True
    return lambda: bool(event.alive) and any(jobs and event in jobs for jobs in queue.active_jobs)


@dataclass
class Work:
    """One request's heavy work: its budget, and whether it must stop (should_stop, check)."""

    budget: Budget
    client_present: Callable[[], bool] = lambda: True
    deadline: float | None = None  # time.monotonic() past which it stops; set when it gets its slot
    reason: str | None = None  # why it stopped, once it has

    def start(self) -> None:
        if self.budget.deadline_s is not None:
            self.deadline = time.monotonic() + self.budget.deadline_s

    def should_stop(self) -> bool:
        """True once the client has gone or the deadline has passed (and for good: reason says which)."""
        if self.reason is None:
            if not self.client_present():
                self.reason = "Stopped: the client that asked for it has gone."
            elif self.deadline is not None and time.monotonic() > self.deadline:
                self.reason = (f"Stopped after {self.budget.deadline_s:.0f} s: a request to this studio may work "
                               f"for at most {self.budget.deadline_s:.0f} s. Ask for less: a shorter sentence, "
                               f"fewer steps or sentences.")
        return self.reason is not None

    def check(self, _done: object = None) -> None:
        """NotServed once the work must stop; a callback between batches (core's on_batch) as it is."""
        if self.should_stop():
            raise NotServed(self.reason)


_WORK: ContextVar[Work | None] = ContextVar("studio_work", default=None)


def working() -> Work | None:
    """The heavy work this thread does now (None outside heavy())."""
    return _WORK.get()


def current_budget() -> Budget:
    """The budget of the request this thread serves (the local one outside Gradio)."""
    work = _WORK.get()
    return work.budget if work is not None else budget_for(this_event().app)


@dataclass(eq=False)
class _Ask:
    session: str | None
    long: bool
    one_per_session: bool
    order: int


# On a public studio, what every call that names no session counts as: one visitor, whose heavy requests take turns
# and who has at most SESSION_REQUESTS in flight (issue 67: session-less calls stepped around both).
SESSIONLESS = "(calls without a session)"


class Slots:
    """count slots for heavy work. A free slot goes to the first waiting request that may take it, short ones
    (estimated at most SHORT_WORK_S) before long ones, each in order of arrival: a long one may take it while
    fewer than long_at_once long ones run, and one of a public studio's requests while no other request of its
    session runs. More than SESSION_REQUESTS requests of one session at once (public) are turned away."""

    def __init__(self, count: int = DECODE_CONCURRENCY, long_at_once: int = LONG_AT_ONCE):
        self.count, self.long_at_once = count, long_at_once
        self._changed = threading.Condition()
        self._waiting: list[_Ask] = []
        self._running: list[_Ask] = []
        self._riding: list[_Ask] = []  # requests in a batch, which holds a slot for them all
        self._arrivals = itertools.count()

    @contextmanager
    def hold(self, session: str | None, long: bool, work: Work, batch: bool = False) -> Iterator[None]:
        """A slot for the duration (NotServed while waiting if work must stop, or its session has too many). batch:
        for a batch of requests (batching.py), whose members are counted by riding(): it takes turns with no
        session's requests."""
        ask = _Ask(None, long, False, next(self._arrivals)) if batch else self._ask(session, long, work)
        with self._changed:
            self._admit(ask)
            self._waiting.append(ask)
            try:
                while not self._may_start(ask):
                    self._changed.wait(WAIT_CHECK_S)
                    work.check()
                self._running.append(ask)
            finally:
                self._waiting.remove(ask)
                self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._running.remove(ask)
                self._changed.notify_all()

    @contextmanager
    def riding(self, session: str | None, work: Work) -> Iterator[None]:
        """A request decoded in a batch, counted among its session's requests in flight while it waits for its batch
        and rides it (the batch holds the slot: hold(..., batch=True)); NotServed if its session has too many."""
        ask = self._ask(session, False, work)
        with self._changed:
            self._admit(ask)
            self._riding.append(ask)
        try:
            yield
        finally:
            with self._changed:
                self._riding.remove(ask)

    def running(self) -> int:
        """How many slots are held now."""
        with self._changed:
            return len(self._running)

    def _ask(self, session: str | None, long: bool, work: Work) -> _Ask:
        if session is None and work.budget.public:  # calls without a session take turns as one visitor's
            session = SESSIONLESS
        return _Ask(session, long, work.budget.public, next(self._arrivals))

    def _admit(self, ask: _Ask) -> None:
        """NotServed when ask's session (public) has SESSION_REQUESTS requests in flight already."""
        in_flight = sum(a.session == ask.session for a in self._waiting + self._running + self._riding)
        if ask.one_per_session and ask.session is not None and in_flight >= SESSION_REQUESTS:
            who = "Calls without a session already have" if ask.session == SESSIONLESS else "This session already has"
            raise NotServed(f"{who} {in_flight} requests running or waiting; a public studio "
                            f"serves each visitor's heavy requests one at a time. Wait for their answers.")

    def _may_start(self, ask: _Ask) -> bool:
        if len(self._running) >= self.count:
            return False
        first = next((a for a in sorted(self._waiting, key=lambda a: (a.long, a.order)) if self._eligible(a)), None)
        return first is ask

    def _eligible(self, ask: _Ask) -> bool:
        if ask.long and sum(a.long for a in self._running) >= self.long_at_once:
            return False
        return not (ask.one_per_session and ask.session is not None
                    and any(a.session == ask.session for a in self._running))


SLOTS = Slots()


@contextmanager
def heavy(estimate_s: float = 0.0) -> Iterator[Work]:
    """Do heavy work (estimated at estimate_s CPU-seconds) in a decoding slot, as this event's Work: its loops call
    work.check() (or core's should_stop=work.should_stop), and whatever they raise once it must stop becomes
    NotServed with the reason. Inside heavy work already, the same slot serves (no second one is waited for)."""
    running = _WORK.get()
    if running is not None:
        yield running
        return
    event = this_event()
    work = Work(budget_for(event.app), event.client_present)
    with SLOTS.hold(event.session, estimate_s > SHORT_WORK_S, work), PRIORITY.serving():
        work.start()
        token = _WORK.set(work)
        try:
            yield work
        except Exception as exc:
            if work.reason is not None and not isinstance(exc, NotServed):
                raise NotServed(work.reason) from None
            raise
        finally:
            _WORK.reset(token)


def in_a_slot(fn: Callable) -> Callable:
    """fn (a callback) run inside heavy(): for the short events of the page (a beam step, a head ablation)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with heavy():
            return fn(*args, **kwargs)
    return call
