"""The decoder's cache (core/model/cache.py): cached decoding equals the full forward pass; rows reorder and
group as beams need."""
from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import batch, tiny

from core.model.cache import DecoderCache


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_forward_at_every_step(norm_first):
    model = tiny(norm_first=norm_first)
    src, tgt = batch([9, 4]), batch([8, 8], seed=2)
    full = model(src, tgt).log_softmax(-1)
    cache = model.start_decoding(src)
    for t in range(tgt.size(1)):
        step = model.decode_step(tgt[:, t], cache)
        torch.testing.assert_close(step, full[:, t], atol=1e-4, rtol=0)


def test_cache_select_reorders_rows():
    model = tiny()
    src, tgt = batch([5, 6, 7]), batch([4, 4, 4], seed=3)
    cache = model.start_decoding(src)
    for t in range(3):
        model.decode_step(tgt[:, t], cache)
    order = torch.tensor([2, 0])
    reordered = cache.select(order)
    expected = model(src[order], tgt[order]).log_softmax(-1)[:, 3]
    torch.testing.assert_close(model.decode_step(tgt[order, 3], reordered), expected, atol=1e-4, rtol=0)


def test_hypotheses_sharing_one_source_equal_rows_with_their_own_copy():
    # Beam search stores a sentence's encoder keys/values once for its G hypotheses.
    model = tiny()
    src, tgt = batch([5, 7]), batch([4] * 6, seed=6)  # 2 sources, 3 decoder rows each
    shared = model.start_decoding(src)
    own = model.start_decoding(src.repeat_interleave(3, dim=0))
    for t in range(tgt.size(1)):
        got, got_cross = model.decode_step(tgt[:, t], shared, need_weights=True)
        want, want_cross = model.decode_step(tgt[:, t], own, need_weights=True)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        for g, w in zip(got_cross, want_cross):
            torch.testing.assert_close(g, w, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="cannot share 2 sources evenly"):
        model.decode_step(tgt[:3, 0], model.start_decoding(src))


def test_sources_in_groups_equal_one_padded_batch():
    # Decoding encodes sources in groups of similar length, each padded only to its own longest.
    model = tiny()
    src, tgt = batch([3, 2, 9, 7, 8], seed=5), batch([4] * 5, seed=6)
    groups = [src[:2, :3], src[2:]]  # the short sources' group without the long ones' padding
    grouped, whole = model.start_decoding(groups), model.start_decoding(src)
    assert [g.k.size(2) for g in grouped.memory[0]] == [3, 9]
    for t in range(2):
        got, got_cross = model.decode_step(tgt[:, t], grouped, need_weights=True)
        want, want_cross = model.decode_step(tgt[:, t], whole, need_weights=True)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        for g, w in zip(got_cross, want_cross):  # the same probabilities, no weight on the other padding
            torch.testing.assert_close(g[:2, :, :3], w[:2, :, :3], atol=1e-6, rtol=0)
            assert bool((w[:2, :, 3:] == 0).all())
    # Rows 0 and 1 finish: their group goes, the other group's tensors are kept as they are.
    kept = torch.tensor([2, 3, 4])
    untouched = grouped.memory[0][1].k
    grouped, whole = grouped.select(kept), whole.select(kept)
    assert len(grouped.memory[0]) == 1 and grouped.memory[0][0].k is untouched
    torch.testing.assert_close(model.decode_step(tgt[kept, 2], grouped), model.decode_step(tgt[kept, 2], whole),
                               atol=1e-5, rtol=0)
    grouped = grouped.select(torch.tensor([0, 2]))  # a row of the remaining group finishes
    assert grouped.memory[0][0].k.size(0) == 2
    with pytest.raises(ValueError, match="increasing order"):
        model.start_decoding(groups).select(torch.tensor([3, 0]))
    with pytest.raises(IndexError, match="0..4"):  # e.g. rows passed where sources were meant
        model.start_decoding(groups).select(torch.tensor([2, 3, 4, 5]))


def test_hypotheses_of_grouped_sources_follow_their_source_when_others_finish():
    # Beam search over groups: 2 hypotheses per source; the first group's only sentence finishes.
    model = tiny()
    src, tgt = batch([3, 8, 6], seed=7), batch([5] * 6, seed=8)
    rows_src = torch.tensor([0, 0, 1, 1, 2, 2])
    cache = model.start_decoding([src[:1, :3], src[1:]])
    for t in range(2):
        model.decode_step(tgt[:, t], cache)
    kept = torch.tensor([3, 2, 4, 5])  # sentence 0 done; sentence 1's hypotheses swap places
    cache, history = cache.select(kept, torch.tensor([1, 2])), tgt[kept, :2]
    assert [g.sources for g in cache.memory[0]] == [2]
    for t in (2, 3):
        history = torch.cat([history, tgt[kept, t, None]], dim=1)
        expected = model(src[rows_src[kept]], history).log_softmax(-1)[:, -1]
        torch.testing.assert_close(model.decode_step(tgt[kept, t], cache), expected, atol=1e-4, rtol=0)


def test_cache_reorders_compose_before_the_next_step():
    # Beam search re-ranks each sentence's hypotheses, then drops finished sentences; the cache
    # applies both at once while the next step appends its keys/values.
    model = tiny()
    src, tgt = batch([5, 7]), batch([5] * 6, seed=3)  # 2 sources, 3 hypotheses each
    cache = model.start_decoding(src)
    for t in range(2):
        model.decode_step(tgt[:, t], cache)
    history, sources = tgt[:, :2], torch.tensor([0, 0, 0, 1, 1, 1])
    for order in ([2, 0, 0, 5, 3, 4], [1, 1, 2, 3, 5, 4]):  # within each sentence's rows
        cache.reorder_hypotheses(torch.tensor(order))
        history = history[order]
    kept = torch.tensor([5, 3, 4])  # sentence 0 finished
    cache, history, sources = cache.select(kept, torch.tensor([1])), history[kept], sources[kept]
    for t in (2, 3):
        step = tgt[kept, t]  # any next tokens will do
        history = torch.cat([history, step[:, None]], dim=1)
        expected = model(src[sources], history).log_softmax(-1)[:, -1]
        torch.testing.assert_close(model.decode_step(step, cache), expected, atol=1e-4, rtol=0)


def test_teacher_forcing_builds_no_cache(monkeypatch):
    """The cache belongs to step-by-step decoding: a whole target (training, scoring, the inspect path, the
    trainer's fixed-shape grid) goes through the decoder at once, and no DecoderCache is made or read."""
    model = tiny()
    src, tgt = batch([9, 4]), batch([8, 5], seed=2)

    def refuse(*args, **kwargs):
        raise AssertionError("a DecoderCache outside step-by-step decoding")

    monkeypatch.setattr(DecoderCache, "__init__", refuse)
    monkeypatch.setattr(DecoderCache, "past", refuse)
    model(src, tgt)
    model(src, tgt, return_attention=True)
    model.hidden(src, tgt)
    model.hidden_grid(src, tgt)
    model.train()(src, tgt).sum().backward()
    with pytest.raises(AssertionError, match="outside step-by-step"):  # where it is made, it is noticed
        model.start_decoding(src)
