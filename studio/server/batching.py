"""Serving a class: requests that arrive together decoded together, inside the decoding slots.

Forty students pressing Translate in the same minute each decoded alone, 7 translations/s, though the
batched decoder does 100-170 sentences/s on the same two cores. A request here joins the open group of
requests for the same model and decoding settings; the group is decoded as one batch once a decoding
slot is free (studio.server.slots' SLOTS, shared with the heavy work), so the busier the studio the larger its
batches. Each answer is what decoding the request alone gives (core's batched decoders equal one sentence at a time;
tests/studio/server/test_batching.py checks it against ``decode_alone``, the plain reference). A sentence that
arrives alone goes through the compiled step of a model that has one warm (compiled_models.py).

Every translation is estimated before it starts (limits.decoding_seconds) and refused over its request's budget;
sampling and long translations (over SHORT_WORK_S) are decoded alone, as heavy work, in a slot of their own (issue 67:
96 session-less sampling /translate calls took no slot at all). Each decoding step asks whether to stop (_Watched):
a translation whose client has gone stops between two steps, a batch once all its clients have.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

import core
from core.inference import compiled, precision
from core.inference.options import DecodeOptions
from core.inference.translation import Translation, max_output_length, target_tokenizer, translate_detailed

from . import slots
from .compiled_models import COMPILED
from .guard import NotServed
from .limits import MAX_BATCH, SHORT_WORK_S, budget_words, decoding_seconds
from .priority import PRIORITY, Priority

Check = Callable[[], None]  # raises NotServed once the work must stop
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
    budget: Any  # its requests' (limits.Budget): the batch stops at its deadline
    items: list = field(default_factory=list)
    members: list = field(default_factory=list)  # each item's slots.Work: whether its client still waits
    results: list = field(default_factory=list)  # a result or a _Failed per item
    done: threading.Event = field(default_factory=threading.Event)


class Batcher:
    """run(bundle, items, options, check) -> one result per item, called on whole groups of items, check() between
    its steps. cost(bundle, items, options): a group's CPU-seconds; a group takes no more items once it would cost
    over SHORT_WORK_S, so every batch is short work in the slots (None: any group is)."""

    def __init__(self, run: Callable[[Any, list, Any, Check], Sequence], window_s: float = WINDOW_S,
                 max_batch: int = MAX_BATCH, slots: slots.Slots = slots.SLOTS, priority: Priority = PRIORITY,
                 cost: Callable[[Any, list, Any], float] | None = None):
        self._run, self.window_s, self.max_batch, self._priority = run, window_s, max_batch, priority
        self.slots, self._cost = slots, cost
        self._lock = threading.Lock()
        self._open: dict[Hashable, _Group] = {}
        self.batches: list[int] = []  # the size of each batch decoded (the last 1,000): bench and tests read it

    def __call__(self, bundle: Any, item: Any, options: Any, key: Hashable) -> Any:
        """item's result, decoded with whatever else arrives meanwhile under the same key (the model and
        the settings: key must tell apart whatever options tells apart). NotServed when its session has too many
        requests in flight, or its batch stopped (all its clients gone, or its deadline passed)."""
        event = slots.this_event()
        work = slots.Work(slots.budget_for(event.app), event.client_present)
        with self._priority.serving(), self.slots.riding(event.session, work):
            group, index, leader = self._join(bundle, item, options, key, work)
            if leader:
                self._lead(key, group)
            group.done.wait()
        result = group.results[index]
        if isinstance(result, _Failed):
            raise result.error
        return result

    def _join(self, bundle: Any, item: Any, options: Any, key: Hashable, work: slots.Work) -> tuple[_Group, int, bool]:
        """The open group item joins (a new one, led by this request, where there is none or it would cost too
        much with item), item's place in it, and whether this request leads it."""
        with self._lock:
            group = self._open.get(key)
            if group is not None and self._cost and self._cost(bundle, group.items + [item], options) > SHORT_WORK_S:
                del self._open[key]  # decoded as it is: item starts the next group
                group = None
            leader = group is None
            if leader:
                group = self._open[key] = _Group(bundle, options, work.budget)
            group.items.append(item)
            group.members.append(work)
            if len(group.items) >= self.max_batch:  # full: later arrivals start the next group
                self._open.pop(key, None)
            return group, len(group.items) - 1, leader

    def _lead(self, key: Hashable, group: _Group) -> None:
        """Wait a moment for company, then for a slot (others join meanwhile), then decode the group; it stops once
        none of its clients waits any more (while it waits for its slot too), or at its deadline."""
        time.sleep(self.window_s)
        work = slots.Work(group.budget, lambda: self._awaited(key, group))
        try:
            with self.slots.hold(None, False, work, batch=True):
                with self._lock:
                    if self._open.get(key) is group:
                        del self._open[key]
                work.start()
                group.results = self._decode(group, work.check)
        except NotServed as stopped:  # while it waited for a slot
            group.results = [_Failed(stopped)] * len(group.items)
        finally:
            group.done.set()

    def _awaited(self, key: Hashable, group: _Group) -> bool:
        """Whether any of group's clients still waits for it; once none does it takes no more requests."""
        with self._lock:
            if any(member.client_present() for member in group.members):
                return True
            if self._open.get(key) is group:
                del self._open[key]
            return False

    def _decode(self, group: _Group, check: Check) -> list:
        """Every item's result, decoded as one batch; when the batch fails, item by item, so that a request
        that cannot be decoded fails alone, with its own message. Stopped, every item has the reason."""
        self.batches = self.batches[-999:] + [len(group.items)]
        try:
            return list(self._run(group.bundle, group.items, group.options, check))
        except NotServed as stopped:
            return [_Failed(stopped)] * len(group.items)
        except Exception as exc:
            if len(group.items) == 1:
                return [_Failed(exc)]
        return [self._alone(group, item, check) for item in group.items]

    def _alone(self, group: _Group, item: Any, check: Check) -> Any:
        try:
            return self._run(group.bundle, [item], group.options, check)[0]
        except Exception as exc:
            return _Failed(exc)


@dataclass
class _Watched:
    """A model as core's decoders use it (config, parameters, start_decoding, decode_step, eval and train) that
    calls check() before each decoding step: core's decoders take no callback, and a beam-16 translation of 2,000
    characters went on for 30 s after its client had gone (issue 67)."""

    model: Any
    check: Check

    def decode_step(self, *args: Any, **kwargs: Any) -> Any:
        self.check()
        return self.model.decode_step(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@dataclass(frozen=True)
class _Reading:
    """What translate_detailed reads of a bundle (a one-way view of it), its model watched."""

    model: _Watched
    tokenizer: Any
    target_tokenizer: Any
    info: dict


def decode_alone(bundle: Any, text: str, options: DecodeOptions) -> Translation:
    """The plain reference: one sentence decoded by itself, as the studio did before batching."""
    return translate_detailed(bundle, [text], options)[0]


def decode_watched(bundle: Any, texts: list[str], options: DecodeOptions, check: Check) -> list[Translation]:
    """translate_detailed(bundle, texts, options), check() before each decoding step. The model it decodes with is
    made here as translate_detailed makes it (options' precision, then its compiled step) and watched."""
    bundle = bundle.toward(None) if hasattr(bundle, "toward") else bundle
    model = precision.prepared(bundle.model, options.dtype)
    if options.compiled:
        model = compiled.prepared(model)
    reading = _Reading(_Watched(model, check), bundle.tokenizer, target_tokenizer(bundle), getattr(bundle, "info", {}))
    return translate_detailed(reading, texts, dataclasses.replace(options, dtype="fp32", compiled=False))


def translation_seconds(bundle: Any, texts: list[str], options: DecodeOptions) -> float:
    """CPU-seconds of decoding texts together with options, each to its longest output allowed."""
    config = bundle.model.config
    lengths = [min(len(bundle.tokenizer.encode(text)) + 1, config.max_len) for text in texts]
    steps = max(max_output_length(n, options, config.max_len)[0] for n in lengths)
    return decoding_seconds(config, max(lengths), steps, len(texts) * options.beam_size)


def _translate_group(bundle: Any, texts: list[str], options: DecodeOptions, check: Check) -> list[Translation]:
    if len(texts) == 1 and COMPILED.ready(bundle.model):  # alone: the compiled step is faster; a group: batched
        options = dataclasses.replace(options, compiled=True)
    return decode_watched(bundle, texts, options, check)


def _score_group(bundle: Any, pairs: list[tuple[str, Any]], top_k: int, check: Check) -> list:
    # One teacher-forced pass per batch of pairs: check() after each batch, as core.score calls on_batch.
    return core.score(bundle, [source for source, _ in pairs], [target for _, target in pairs], top_k=top_k,
                      on_batch=lambda _n: check())


_TRANSLATIONS = Batcher(_translate_group, cost=translation_seconds)
_SCORES = Batcher(_score_group)


def translate(bundle: Any, text: str, options: DecodeOptions, key: Hashable) -> Translation:
    """text translated with options, batched with other requests for the same model (key: its registry
    key) and options. ValueError when it would cost more than the request's budget; NotServed when the slots turn
    it away or it stops. Sampling is decoded alone (a seed repeats a call only with the same batch), and so is a long
    translation: in a slot of its own, as heavy work."""
    seconds = translation_seconds(bundle, [text], options)
    budget = slots.current_budget()
    if seconds > budget.cpu_s:
        raise ValueError(f"this translation could take ~{seconds:,.1f} CPU-seconds (beam {options.beam_size}, up to "
                         f"{options.max_len_b} tokens more than the source), and {budget_words(budget)}: a shorter "
                         f"sentence, a smaller beam or fewer extra tokens")
    if options.method == "sample" or seconds > SHORT_WORK_S or slots.working() is not None:
        with slots.heavy(seconds) as work:
            return decode_watched(bundle, [text], _alone_options(bundle, options), work.check)[0]
    return _TRANSLATIONS(bundle, text, options, (key, id(bundle), repr(options)))


def _alone_options(bundle: Any, options: DecodeOptions) -> DecodeOptions:
    """A long beam or greedy translation takes the compiled step where it is warm, as a batch of one does."""
    if options.method != "sample" and COMPILED.ready(bundle.model):
        return dataclasses.replace(options, compiled=True)
    return options


def score(bundle: Any, source: str, target: Any, top_k: int, key: Hashable) -> Any:
    """core.score of one pair, batched with other requests for the same model."""
    return _SCORES(bundle, (source, target), top_k, (key, id(bundle), top_k))
