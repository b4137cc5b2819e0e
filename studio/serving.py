"""Serving a class: requests that arrive together decoded together, and before the live training run.

Forty students pressing Translate in the same minute each decoded alone, 7 translations/s, though the
batched decoder does 100-170 sentences/s on the same two cores. A request here joins the open group of
requests for the same model and decoding settings; the group is decoded as one batch once a decoding
slot is free (at most DECODE_CONCURRENCY at once), so the busier the studio the larger its batches. Each answer
is what decoding the request alone gives (core's batched decoders equal one sentence at a time;
tests/studio/test_serving.py checks it against ``decode_alone``, the plain reference).

While requests are being served the training thread waits between its steps (``yield_to_requests``), for
at most YIELD_FACTOR times the length of its last step: training keeps a share of the time, serving first.

Heavy work (beam search, attention maps, saliency, compare; issue 55) runs inside ``heavy()``: it takes one of the
decoding slots (``Slots``: short requests first, at most LONG_AT_ONCE long ones, and on a public studio one per
session at a time) and carries a ``Work``, which its loops ask whether to stop: its client has gone, or its
deadline has passed. Gradio only tells which session and event a callback serves (``this_event``).
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
import threading
import time
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Sequence

import core
from core.inference.compiled import compiler_available
from core.inference.decoding import DecodeOptions
from core.inference.translation import Translation, translate_detailed

from .limits import (
    DECODE_CONCURRENCY,
    LONG_AT_ONCE,
    MAX_BATCH,
    SESSION_REQUESTS,
    SHORT_WORK_S,
    Budget,
    budget_for,
)
from .text import NotServed

WINDOW_S = 0.005  # how long a lone request waits for company before it takes a free slot
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


@dataclass
class _Failed:
    """A request's own exception, raised in the thread that made the request."""

    error: BaseException


@dataclass
class _Group:
    """Requests for one model and one setting, decoded as one batch."""

    bundle: Any
    options: Any
    items: list = field(default_factory=list)
    results: list = field(default_factory=list)  # a result or a _Failed per item
    done: threading.Event = field(default_factory=threading.Event)


class Batcher:
    """run(bundle, items, options) -> one result per item, called on whole groups of items."""

    def __init__(self, run: Callable[[Any, list, Any], Sequence], window_s: float = WINDOW_S,
                 max_batch: int = MAX_BATCH, slots: int = DECODE_CONCURRENCY, priority: Priority = PRIORITY):
        self._run, self.window_s, self.max_batch, self._priority = run, window_s, max_batch, priority
        self._slots = threading.Semaphore(slots)
        self._lock = threading.Lock()
        self._open: dict[Hashable, _Group] = {}
        self.batches: list[int] = []  # the size of each batch decoded (the last 1,000): bench and tests read it

    def __call__(self, bundle: Any, item: Any, options: Any, key: Hashable) -> Any:
        """item's result, decoded with whatever else arrives meanwhile under the same key (the model and
        the settings: key must tell apart whatever options tells apart)."""
        with self._priority.serving():
            with self._lock:
                group = self._open.get(key)
                leader = group is None
                if leader:
                    group = self._open[key] = _Group(bundle, options)
                index = len(group.items)
                group.items.append(item)
                if len(group.items) >= self.max_batch:  # full: later arrivals start the next group
                    self._open.pop(key, None)
            if leader:
                self._lead(key, group)
            group.done.wait()
            result = group.results[index]
            if isinstance(result, _Failed):
                raise result.error
            return result

    def _lead(self, key: Hashable, group: _Group) -> None:
        """Wait a moment for company, then for a slot (others join meanwhile), then decode the group."""
        time.sleep(self.window_s)
        with self._slots:
            with self._lock:
                if self._open.get(key) is group:
                    del self._open[key]
            try:
                group.results = self._decode(group)
            finally:
                group.done.set()

    def _decode(self, group: _Group) -> list:
        """Every item's result, decoded as one batch; when the batch fails, item by item, so that a request
        that cannot be decoded fails alone, with its own message."""
        self.batches = self.batches[-999:] + [len(group.items)]
        try:
            return list(self._run(group.bundle, group.items, group.options))
        except Exception as exc:
            if len(group.items) == 1:
                return [_Failed(exc)]
        return [self._alone(group, item) for item in group.items]

    def _alone(self, group: _Group, item: Any) -> Any:
        try:
            return self._run(group.bundle, [item], group.options)[0]
        except Exception as exc:
            return _Failed(exc)


def decode_alone(bundle: Any, text: str, options: DecodeOptions) -> Translation:
    """The plain reference: one sentence decoded by itself, as the studio did before batching."""
    return translate_detailed(bundle, [text], options)[0]


def _translate_group(bundle: Any, texts: list[str], options: DecodeOptions) -> list[Translation]:
    if len(texts) == 1 and COMPILED.ready(bundle.model):  # alone: the compiled step is faster; a group: batched
        options = dataclasses.replace(options, compiled=True)
    return translate_detailed(bundle, texts, options)


class CompiledModels:
    """The models whose decoding step is compiled and warm (`python -m studio --compiled`): a sentence that
    arrives alone is decoded through the compiled step (core/inference/compiled.py: ~1.3x on one sentence,
    bench/compiled_step.py), a group by the batched eager decoders (faster for several). A model is warmed in
    the background, on its example sentences (beam search and greedy), before any request uses it: nobody waits
    for a compile at the first click. A shape the examples did not compile (a long sentence) compiles at its
    first use (seconds); inductor keeps the graphs on disk, so a restart warms up quicker."""

    def __init__(self) -> None:
        self._ready: weakref.WeakSet = weakref.WeakSet()

    def warm(self, bundles: Iterable[Any]) -> threading.Thread | None:
        """Compile each bundle's steps in a background thread, which also reads them (a lazy iterable: models
        are loaded there, not before the page is served); None: no C++ compiler, the eager step stays."""
        if not compiler_available():
            return None
        thread = threading.Thread(target=self._warm, args=(bundles,), name="compile-decoder", daemon=True)
        thread.start()
        return thread

    def _warm(self, bundles: Iterable[Any]) -> None:
        for bundle in bundles:
            examples = list((getattr(bundle, "info", None) or {}).get("examples", []))[:3] or ["a"]
            try:
                for method in ("beam", "greedy"):
                    with PRIORITY.serving():  # as a request: the live training run waits
                        translate_detailed(bundle, examples, DecodeOptions(method=method, compiled=True))
            except Exception as exc:  # noqa: BLE001 (the eager step is the reference: the model stays with it)
                print(f"--compiled: {getattr(bundle, 'name', 'a model')} did not compile ({type(exc).__name__}: "
                      f"{exc}); it decodes eager", file=sys.stderr)
                continue
            self._ready.add(bundle.model)

    def ready(self, model: Any) -> bool:
        return model in self._ready


COMPILED = CompiledModels()


def _score_group(bundle: Any, pairs: list[tuple[str, Any]], top_k: int) -> list:
    return core.score(bundle, [source for source, _ in pairs], [target for _, target in pairs], top_k=top_k)


_TRANSLATIONS = Batcher(_translate_group)
_SCORES = Batcher(_score_group)


def translate(bundle: Any, text: str, options: DecodeOptions, key: Hashable) -> Translation:
    """text translated with options, batched with other requests for the same model (key: its registry
    key) and options. Sampling is decoded alone: a seed repeats a call only with the same batch."""
    if options.method == "sample":
        with PRIORITY.serving():
            return decode_alone(bundle, text, options)
    return _TRANSLATIONS(bundle, text, options, (key, id(bundle), repr(options)))


def score(bundle: Any, source: str, target: Any, top_k: int, key: Hashable) -> Any:
    """core.score of one pair, batched with other requests for the same model."""
    return _SCORES(bundle, (source, target), top_k, (key, id(bundle), top_k))


class Recent:
    """The last `size` results of an expensive function, shared by every session: forty students looking at
    the same example compute it once and hold one copy between them, not one each. A result is kept with
    the object it was computed from (e.g. a model), matched by identity: a key naming an object by id() can
    never hand out the result of another object that took its id. max_bytes (with nbytes, a result's size) bounds
    what is kept in bytes too: 32 analyses of 256-token sentences held 300 MB after their sessions were gone."""

    def __init__(self, size: int, max_bytes: int | None = None, nbytes: Callable[[Any], int] = lambda value: 0):
        self.size, self.max_bytes, self._nbytes = size, max_bytes, nbytes
        self._items: OrderedDict[Hashable, tuple[Any, Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, source: Any, make: Callable[[], Any]) -> Any:
        """make()'s result for key, computed from source; made now unless one is kept."""
        with self._lock:
            kept = self._items.get(key)
            if kept is not None and kept[0] is source:
                self._items.move_to_end(key)
                return kept[1]
        value = make()
        with self._lock:
            self._items[key] = (source, value, self._nbytes(value))
            self._items.move_to_end(key)
            while len(self._items) > self.size or (len(self._items) > 1 and self._over_bytes()):
                self._items.popitem(last=False)
        return value

    def _over_bytes(self) -> bool:
        return self.max_bytes is not None and sum(n for _, _, n in self._items.values()) > self.max_bytes


# ----- heavy work: fair slots, deadlines, clients that leave -----------------------------------------
WAIT_CHECK_S = 0.25  # how often a request waiting for a slot looks whether its client is still there


@dataclass(frozen=True)
class Event:
    """The Gradio event a callback serves: its session (a browser tab, a script's Client; None outside Gradio),
    the app serving it, and whether its client is still connected."""

    session: str | None
    app: Any
    client_present: Callable[[], bool]


def this_event() -> Event:
    """The event this thread serves (Gradio sets its context in the worker thread before calling back)."""
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
        self._arrivals = itertools.count()

    @contextmanager
    def hold(self, session: str | None, long: bool, work: Work) -> Iterator[None]:
        """A slot for the duration (NotServed while waiting if work must stop, or its session has too many)."""
        ask = _Ask(session, long, work.budget.public, next(self._arrivals))
        with self._changed:
            self._admit(ask)
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

    def running(self) -> int:
        """How many slots are held now."""
        with self._changed:
            return len(self._running)

    def _admit(self, ask: _Ask) -> None:
        in_flight = sum(a.session == ask.session for a in self._waiting + self._running)
        if ask.one_per_session and ask.session is not None and in_flight >= SESSION_REQUESTS:
            raise NotServed(f"This session already has {in_flight} requests running or waiting; a public studio "
                            f"serves each visitor's heavy requests one at a time. Wait for their answers.")
        self._waiting.append(ask)

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
