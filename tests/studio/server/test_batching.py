"""Issue 43's micro-batching (studio/server/batching.py): requests arriving together are decoded together, per
model and settings, each answer what decoding it alone gives; a failing request fails alone; the Translate
tab translates through the batcher."""
from __future__ import annotations

import contextlib
import math
import re
import threading
import time

import pytest

import core
from core.bundle import ModelBundle
from core.inference.options import DecodeOptions
from core.model.transformer import Transformer
from studio.server import batching, guard, limits, slots
from tests.helpers.studio import SENTENCES, studio_bundle
from tests.helpers.waiting import wait_until

TEXTS = SENTENCES + ["Ein Hund .", "Zwei Männer spielen auf einer Wiese .", "Eine Frau rennt durch den Schnee ."]


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
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    with batcher.slots.hold(None, False, slots.Work(limits.local_budget())):
        for t in threads:
            t.start()
        wait_until(lambda: sum(len(g.items) for g in batcher._open.values()) == (open_items or len(calls))
                   and len(batcher._open) == expect_groups)
    for t in threads:
        t.join(60)
    return results


@pytest.mark.parametrize("method", ["beam", "greedy"])
def test_requests_decoded_together_equal_each_decoded_alone(method):
    bundle = studio_bundle()
    options = DecodeOptions(method=method, beam_size=4 if method == "beam" else 1, alpha=0.6, max_len_b=10,
                            n_best=4 if method == "beam" else 1)
    batcher = batching.Batcher(batching._translate_group, window_s=0, slots=slots.Slots(1))
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
    batcher = batching.Batcher(batching._translate_group, window_s=0, slots=slots.Slots(1))
    calls = [(bundle, text, opts, repr(opts)) for text in TEXTS[:3] for opts in (beam, greedy)]
    results = together(batcher, calls, expect_groups=2)
    assert sorted(batcher.batches) == [3, 3]
    for (_, text, opts, _), result in zip(calls, results):
        assert result.ids == batching.decode_alone(bundle, text, opts).ids


def test_a_full_group_closes_and_a_failing_request_fails_alone():
    def run(bundle, items, options, check):
        if "bad" in items:
            raise ValueError("bad" if len(items) == 1 else "the whole batch")
        return [item.upper() for item in items]
    batcher = batching.Batcher(run, window_s=0, slots=slots.Slots(1), max_batch=3)
    results = together(batcher, [(None, item, None, "k") for item in ("a", "b", "bad", "c")], expect_groups=1,
                       open_items=1)
    assert results[:2] == ["A", "B"] and str(results[2]) == "bad" and results[3] == "C"
    assert sorted(batcher.batches) == [1, 3]  # the full group of 3 went on its own; "c" began the next


def test_score_requests_batched_equal_each_scored_alone():
    bundle = studio_bundle()
    pairs = [(s, t) for s, t in zip(TEXTS, ["Ein Hund", "Zwei Männer", "", "Eine Frau", "Hund", "Schnee ."])]
    batcher = batching.Batcher(batching._score_group, window_s=0, slots=slots.Slots(1))
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


# ----- issue 67: translations inside the decoding slots, stopped when their clients leave ---------------------------
def test_a_watched_decode_stops_between_two_steps_and_otherwise_equals_decoding_alone():
    bundle, options = studio_bundle(), DecodeOptions(beam_size=4, max_len_b=10)
    [watched] = batching.decode_watched(bundle, [TEXTS[1]], options, lambda: None)
    assert watched.ids == batching.decode_alone(bundle, TEXTS[1], options).ids
    steps = []

    def check() -> None:
        steps.append(1)
        if len(steps) == 3:
            raise guard.NotServed("Stopped: the client that asked for it has gone.")
    with pytest.raises(guard.NotServed, match="client that asked for it has gone"):
        batching.decode_watched(bundle, [TEXTS[1]], options, check)
    assert len(steps) == 3  # asked before every step; the third stopped it


def test_a_batch_stops_once_all_its_clients_have_gone(monkeypatch):
    present = {"a": True, "b": True}

    def this_event() -> slots.Event:  # each calling thread a client of its own, there while present says so
        name = threading.current_thread().name
        return slots.Event(name, None, lambda: present[name])
    monkeypatch.setattr(slots, "this_event", this_event)
    started = threading.Event()

    def run(bundle, items, options, check):  # decodes until it must stop
        started.set()
        while True:
            check()
    batcher = batching.Batcher(run, window_s=0, slots=slots.Slots(1))
    results = {}

    def call(name: str) -> None:
        try:
            results[name] = batcher(None, name, None, "k")
        except guard.NotServed as stopped:
            results[name] = str(stopped)
    threads = [threading.Thread(target=call, args=(name,), name=name) for name in present]
    with batcher.slots.hold(None, False, slots.Work(limits.local_budget())):  # both join one group meanwhile
        for t in threads:
            t.start()
        wait_until(lambda: sum(len(g.items) for g in batcher._open.values()) == 2)
    started.wait(10)
    present["a"] = False  # one client left: the batch goes on for the other
    assert not any(t.join(0.2) or not t.is_alive() for t in threads)
    present["b"] = False
    for t in threads:
        t.join(10)
    assert results == {name: "Stopped: the client that asked for it has gone." for name in present}
    assert batcher.slots.running() == 0


def test_batched_requests_count_among_their_sessions_requests_in_flight():
    pool, work = slots.Slots(2), slots.Work(limits.PUBLIC_BUDGET)
    with contextlib.ExitStack() as riding:
        for _ in range(limits.SESSION_REQUESTS):
            riding.enter_context(pool.riding(None, work))
        with pytest.raises(guard.NotServed, match=f"Calls without a session already have {limits.SESSION_REQUESTS}"):
            riding.enter_context(pool.riding(None, work))
        riding.enter_context(pool.riding("page", work))  # another visitor's goes ahead


def test_a_translation_over_its_budget_is_refused_in_words(monkeypatch):
    from studio.server.registry import ModelRegistry
    from studio.tabs import translate

    registry = ModelRegistry(None)
    registry.add("studio-tiny", studio_bundle())
    monkeypatch.setenv("STUDIO_REQUEST_CPU_S", "0.001")
    *_, notes, current = translate.translate(registry, "studio-tiny", TEXTS[0], "sample", 4, 0.6, 200, 1, 3.0, 0,
                                             1.0, None)
    said = notes.replace("\\", "")  # Markdown's escapes
    assert re.match(r"\*\*Cannot translate:\*\* this translation could take ~\d+\.\d CPU-seconds \(beam 1, up to 200 "
                    r"tokens more than the source\), and a request here may take ~0.001 CPU-seconds", said)
    assert current.options is None


class Endless(Transformer):
    """A model that never writes <eos> and takes 50 ms a step: a translation runs to its longest (~13 s), unless
    stopped."""

    def decode_step(self, tokens, cache, need_weights=False):
        log_probs = super().decode_step(tokens, cache, need_weights)
        time.sleep(0.05)
        log_probs[:, self.config.eos_id] = -math.inf
        return log_probs


@pytest.fixture(scope="module")
def endless(tmp_path_factory):
    """A --public studio holding an Endless model ("studio-endless"), its address."""
    from studio import app
    from studio.server.registry import ModelRegistry

    tiny = studio_bundle(256)
    registry = ModelRegistry(None)
    registry.add("studio-endless", ModelBundle(Endless(tiny.model.config).eval(), tiny.tokenizer, dict(tiny.info)))
    demo = app.build_app(registry, "studio-endless", tmp_path_factory.mktemp("checkpoints"), public=True)
    demo.queue(max_size=limits.QUEUE_SIZE, default_concurrency_limit=limits.DEFAULT_CONCURRENCY)
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, show_error=False)
    yield demo.local_url
    demo.close()


@pytest.mark.parametrize("method", ["sample", "beam"])
def test_a_long_translate_takes_a_slot_and_stops_when_its_client_leaves(endless, method):
    """Issue 67's probe: sampling at temperature 3 (or beam 16), 200 extra tokens, 2,000 characters."""
    from tests.studio.server.test_abuse import post

    text = " ".join(TEXTS * 80)[:limits.MAX_INPUT_CHARS]
    stream = post(endless, "translate", ["studio-endless", text, method, 16, 0.6, 200, 1, 3.0, 0, 1.0, "", "fp32"])
    wait_until(lambda: slots.SLOTS.running() == 1, 20)  # in a decoding slot, as heavy work
    stream.close()  # the visitor goes: the decoding stops at its next step
    assert wait_until(lambda: slots.SLOTS.running() == 0, 10) < 2.0
