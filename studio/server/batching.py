"""Serving a class: requests that arrive together decoded together.

Forty students pressing Translate in the same minute each decoded alone, 7 translations/s, though the
batched decoder does 100-170 sentences/s on the same two cores. A request here joins the open group of
requests for the same model and decoding settings; the group is decoded as one batch once a decoding
slot is free (at most DECODE_CONCURRENCY at once), so the busier the studio the larger its batches. Each answer
is what decoding the request alone gives (core's batched decoders equal one sentence at a time;
tests/studio/server/test_batching.py checks it against ``decode_alone``, the plain reference). A sentence that
arrives alone goes through the compiled step of a model that has one warm (compiled_models.py).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

import core
from core.inference.options import DecodeOptions
from core.inference.translation import Translation, translate_detailed

from .compiled_models import COMPILED
from .limits import DECODE_CONCURRENCY, MAX_BATCH
from .priority import PRIORITY, Priority

WINDOW_S = 0.005  # how long a lone request waits for company before it takes a free slot


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
