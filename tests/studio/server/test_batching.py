"""Issue 43's micro-batching (studio/server/batching.py): requests arriving together are decoded together, per
model and settings, each answer what decoding it alone gives; a failing request fails alone; the Translate
tab translates through the batcher."""
from __future__ import annotations

import threading

import pytest

import core
from core.inference.options import DecodeOptions
from studio.server import batching
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
