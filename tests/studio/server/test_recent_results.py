"""Results shared by every session (studio/server/recent_results.py): kept by identity with what they were
computed from, bounded in number and in bytes; the Attention tab's shared analysis equals a fresh one."""
from __future__ import annotations

from core.inference.options import DecodeOptions
from studio.server import batching, recent_results
from tests.helpers.studio import SENTENCES, studio_bundle


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
    ids = batching.decode_alone(bundle, SENTENCES[0], DecodeOptions()).ids
    current = Current("studio-tiny", SENTENCES[0], list(ids), DecodeOptions(), registry.key("studio-tiny"), bundle)
    first, second = attention.show(registry, current)[0], attention.show(registry, current)[0]
    fresh = attention.analyse(bundle, "studio-tiny", SENTENCES[0], list(ids))
    assert first.maps is second.maps  # one copy for every session looking at this pair
    assert first.src_tokens == fresh.src_tokens and first.out_tokens == fresh.out_tokens
    assert all(np.array_equal(first.maps[k], fresh.maps[k]) for k in fresh.maps)
    forced = attention.show(registry, Current(**{**current.__dict__, "forced": list(ids)}))[0]
    assert forced.forced and not first.forced  # the flag is each session's own
