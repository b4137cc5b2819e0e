"""Serving a class: requests that arrive together decoded together, and before the live training run.

Forty students pressing Translate in the same minute each decoded alone, 7 translations/s, though the
batched decoder does 100-170 sentences/s on the same two cores. A request here joins the open group of
requests for the same model and decoding settings; the group is decoded as one batch once a decoding
slot is free (at most DECODE_CONCURRENCY at once), so the busier the studio the larger its batches. Each answer
is what decoding the request alone gives (core's batched decoders equal one sentence at a time;
tests/test_serving.py checks it against ``decode_alone``, the plain reference).

While requests are being served the training thread waits between its steps (``yield_to_requests``), for
at most YIELD_FACTOR times the length of its last step: training keeps a share of the time, serving first.
No Gradio here.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterator, Sequence

import core
from core.inference.decoding import DecodeOptions
from core.inference.translation import Translation, translate_detailed

from .limits import DECODE_CONCURRENCY, MAX_BATCH

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
    return translate_detailed(bundle, texts, options)


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
    never hand out the result of another object that took its id."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, tuple[Any, Any]] = OrderedDict()
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
            self._items[key] = (source, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value
