"""Issue 43's micro-batching (studio.server.batching): requests arriving together are decoded together, per model and
settings, each answer what decoding it alone gives; serving goes before the live training run, which keeps
making progress."""
from __future__ import annotations

import threading
import time

import pytest

import core
from core.inference.options import DecodeOptions
from studio.server import batching, compiled_models, recent_results
from studio.server.priority import MAX_YIELD_S, YIELD_FACTOR, Priority
from tests.helpers.studio import SENTENCES, studio_bundle

TEXTS = SENTENCES + ["Ein Hund .", "Zwei Männer spielen auf einer Wiese .", "Eine Frau rennt durch den Schnee ."]


def wait_until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.005)


def together(batcher: batching.Batcher, calls: list[tuple], expect_groups: int, open_items: int | None = None) -> list:
    """Each call (bundle, item, options, key) made in a thread of its own while the batcher's one decoding
    slot is held, released once they have all joined their groups (expect_groups open, holding open_items: all
    the calls unless some group filled up and closed): the results in call order."""
    results: list = [None] * len(calls)

    def call(i: int) -> None:
        try:
            results[i] = batcher(*calls[i])
        except Exception as exc:  # handed to the test
            results[i] = exc
    batcher._slots.acquire()
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    wait_until(lambda: sum(len(g.items) for g in batcher._open.values()) == (open_items or len(calls))
               and len(batcher._open) == expect_groups)
    batcher._slots.release()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.parametrize("method", ["beam", "greedy"])
def test_requests_decoded_together_equal_each_decoded_alone(method):
    bundle = studio_bundle()
    options = DecodeOptions(method=method, beam_size=4 if method == "beam" else 1, alpha=0.6, max_len_b=10,
                            n_best=4 if method == "beam" else 1)
    batcher = batching.Batcher(batching._translate_group, window_s=0, slots=1)
    results = together(batcher, [(bundle, text, options, "k") for text in TEXTS], expect_groups=1)
    assert batcher.batches == [len(TEXTS)]  # one batch
    for text, result in zip(TEXTS, results):
        alone = batching.decode_alone(bundle, text, options)
        assert (result.ids, result.text, result.tokens) == (alone.ids, alone.text, alone.tokens)
        assert [t for t, _ in result.n_best] == [t for t, _ in alone.n_best]
        assert result.score == pytest.approx(alone.score, abs=1e-5)  # float32 sums in another order


def test_other_settings_or_models_are_other_batches():
    bundle = studio_bundle()
    beam, greedy = DecodeOptions(beam_size=2, max_len_b=8), DecodeOptions(method="greedy", beam_size=1, max_len_b=8)
    batcher = batching.Batcher(batching._translate_group, window_s=0, slots=1)
    calls = [(bundle, text, opts, repr(opts)) for text in TEXTS[:3] for opts in (beam, greedy)]
    results = together(batcher, calls, expect_groups=2)
    assert sorted(batcher.batches) == [3, 3]
    for (_, text, opts, _), result in zip(calls, results):
        assert result.ids == batching.decode_alone(bundle, text, opts).ids


def test_a_full_group_closes_and_a_failing_request_fails_alone():
    def run(bundle, items, options):
        if "bad" in items:
            raise ValueError("bad" if len(items) == 1 else "the whole batch")
        return [item.upper() for item in items]
    batcher = batching.Batcher(run, window_s=0, slots=1, max_batch=3)
    results = together(batcher, [(None, item, None, "k") for item in ("a", "b", "bad", "c")], expect_groups=1,
                       open_items=1)
    assert results[:2] == ["A", "B"] and str(results[2]) == "bad" and results[3] == "C"
    assert sorted(batcher.batches) == [1, 3]  # the full group of 3 went on its own; "c" began the next


def test_score_requests_batched_equal_each_scored_alone():
    bundle = studio_bundle()
    pairs = [(s, t) for s, t in zip(TEXTS, ["Ein Hund", "Zwei Männer", "", "Eine Frau", "Hund", "Schnee ."])]
    batcher = batching.Batcher(batching._score_group, window_s=0, slots=1)
    results = together(batcher, [(bundle, pair, 5, "k") for pair in pairs], expect_groups=1)
    for (source, target), result in zip(pairs, results):
        [alone] = core.score(bundle, [source], [target], top_k=5)
        assert (result.ids, result.ranks, result.tokens) == (alone.ids, alone.ranks, alone.tokens)
        assert result.token_logprobs == pytest.approx(alone.token_logprobs, abs=1e-5)


def test_the_studio_translates_through_the_batcher(monkeypatch):
    from studio.server.registry import ModelRegistry
    from studio.tabs import translate

    registry = ModelRegistry(None)
    registry.add("studio-tiny", studio_bundle())
    seen = []
    monkeypatch.setattr(batching, "translate", lambda *a: seen.append(a) or batching.decode_alone(*a[:3]))
    text = translate.translate(registry, "studio-tiny", TEXTS[0], "beam", 4, 0.6, 10, 4, 1.0, 0, 1.0, None)[0]
    assert seen and seen[0][3] == registry.key("studio-tiny") and text


def test_with_compiled_steps_a_lone_sentence_goes_compiled_and_a_group_batched(monkeypatch):
    """python -m studio --compiled: the warm-up and the choice; torch.compile left out (the static step runs as
    itself, equal to the eager one: tests/core/inference/test_compiled.py), so that this checks the wiring only."""
    from core.inference import compiled

    monkeypatch.setattr(compiled.torch, "compile", lambda module, **options: module)
    monkeypatch.setattr(compiled, "compiler_available", lambda: True)
    monkeypatch.setattr(compiled_models, "compiler_available", lambda: True)
    bundle = studio_bundle()
    warm = compiled_models.CompiledModels()
    monkeypatch.setattr(batching, "COMPILED", warm)
    warm.warm(iter([bundle])).join(120)
    assert warm.ready(bundle.model)
    static = []
    monkeypatch.setattr(compiled, "static_cache", lambda *a, real=compiled.static_cache: static.append(1) or real(*a))
    options = DecodeOptions(beam_size=4, max_len_b=10)
    [alone] = batching._translate_group(bundle, TEXTS[:1], options)
    assert static and alone.ids == batching.decode_alone(bundle, TEXTS[0], options).ids
    static.clear()
    batching._translate_group(bundle, TEXTS[:3], options)
    assert not static  # several sentences: the batched eager decoders


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


def test_recent_results_are_shared_and_bounded():
    recent, made = recent_results.Recent(2), []

    def make(value):
        return lambda: made.append(value) or value
    model, other = object(), object()
    assert recent.get(("a", id(model)), model, make("A")) == "A"
    assert recent.get(("a", id(model)), model, make("again")) == "A" and made == ["A"]  # computed once
    assert recent.get(("a", id(model)), other, make("B")) == "B"  # another object under the same key: made anew
    recent.get("b", model, make("C"))
    recent.get("c", model, make("D"))
    assert recent.get(("a", id(model)), other, make("E")) == "E"  # the oldest went: at most 2 kept


def test_recent_results_are_bounded_in_bytes_too():
    recent = recent_results.Recent(10, max_bytes=100, nbytes=len)
    model = object()
    for name, size in (("a", 40), ("b", 40), ("c", 40)):
        recent.get(name, model, lambda size=size: "x" * size)
    assert list(recent._items) == ["b", "c"]  # 120 bytes: the oldest went
    recent.get("huge", model, lambda: "x" * 500)
    assert list(recent._items) == ["huge"]  # the newest stays, however large: it is in use


def test_the_attention_tabs_shared_analysis_equals_a_fresh_one():
    import numpy as np

    from studio.server.registry import ModelRegistry
    from studio.shell import Current
    from studio.tabs import attention

    bundle = studio_bundle()
    registry = ModelRegistry(None)
    registry.add("studio-tiny", bundle)
    ids = batching.decode_alone(bundle, TEXTS[0], DecodeOptions()).ids
    current = Current("studio-tiny", TEXTS[0], list(ids), DecodeOptions(), registry.key("studio-tiny"), bundle)
    first, second = attention.show(registry, current)[0], attention.show(registry, current)[0]
    fresh = attention.analyse(bundle, "studio-tiny", TEXTS[0], list(ids))
    assert first.maps is second.maps  # one copy for every session looking at this pair
    assert first.src_tokens == fresh.src_tokens and first.out_tokens == fresh.out_tokens
    assert all(np.array_equal(first.maps[k], fresh.maps[k]) for k in fresh.maps)
    forced = attention.show(registry, Current(**{**current.__dict__, "forced": list(ids)}))[0]
    assert forced.forced and not first.forced  # the flag is each session's own
