"""core.data.batching: section 5.1's batching by approximate sequence length."""
from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.data.batching import (
    Example,
    TokenBatcher,
    encode_pairs,
    pad_batch,
    sentence_batches,
    source_ids,
    unknown_from_rare_words,
    unknown_share,
)
from core.data.files import load_corpus
from core.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer


def numbered(lengths: list[tuple[int, int]]) -> list[Example]:
    """Example i starts its source with token 100 + i, so a batch row names its example."""
    return [Example([100 + i] + [5] * (s - 2) + [EOS_ID], [BOS_ID] + [6] * (t - 2) + [EOS_ID])
            for i, (s, t) in enumerate(lengths)]


def ids_of(batch) -> list[int]:
    return [row - 100 for row in batch.src[:, 0].tolist()]


@pytest.fixture(scope="module")
def word_tokenizer() -> Tokenizer:
    return Tokenizer.train(["ein Haus am See .", "a house by the lake ."], 100, "word", min_frequency=1)


def test_encode_pairs(word_tokenizer):
    pairs = [("ein Haus .", "a house ."), ("ein Haus am See .", "a house by the lake ."), ("See", "lake")]
    examples, dropped = encode_pairs(pairs, word_tokenizer, max_len=6)
    assert dropped == 1  # the second target is 6 tokens + BOS + EOS
    first = examples[0]
    assert first.src == word_tokenizer.encode("ein Haus .") + [EOS_ID] == source_ids(word_tokenizer, "ein Haus .")
    assert first.tgt == [BOS_ID] + word_tokenizer.encode("a house .") + [EOS_ID]
    assert encode_pairs(pairs, word_tokenizer, max_len=8)[1] == 0
    with pytest.raises(ValueError, match="max_len must be an integer >= 2"):
        encode_pairs(pairs, word_tokenizer, max_len=1)


def test_unknown_share_counts_unk_among_the_words(word_tokenizer):
    examples, _ = encode_pairs([("ein Haus .", "a house ."), ("ein Boot .", "a boat .")], word_tokenizer, max_len=8)
    assert unknown_share(examples) == 2 / 12  # "Boot" and "boat"; <bos> and <eos> are not words
    assert unknown_share([]) == 0


def test_unknown_from_rare_words_only_for_a_word_vocabulary_short_of_its_size(word_tokenizer):
    assert unknown_from_rare_words(word_tokenizer, word_tokenizer.vocab_size + 1)  # not full: words seen once
    assert not unknown_from_rare_words(word_tokenizer, word_tokenizer.vocab_size)  # full: too small
    bpe = Tokenizer.train(["ein Haus am See .", "a house by the lake ."] * 3, 40, "bpe")
    assert not unknown_from_rare_words(bpe, bpe.vocab_size + 100)  # pieces: more entries would help


def test_pad_batch():
    batch = pad_batch([Example([7, 8, EOS_ID], [BOS_ID, 9, EOS_ID]),
                       Example([7, EOS_ID], [BOS_ID, 9, 9, 9, EOS_ID])])
    assert batch.src.tolist() == [[7, 8, EOS_ID], [7, EOS_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 9, EOS_ID, PAD_ID], [BOS_ID, 9, 9, 9]]
    assert batch.tgt_out.tolist() == [[9, EOS_ID, PAD_ID, PAD_ID], [9, 9, 9, EOS_ID]]
    assert batch.src.dtype == torch.long and batch.n_tgt_tokens == 6
    assert batch.n_tgt_tokens == int(batch.tgt_out.ne(PAD_ID).sum())
    assert batch.padding_ratio == pytest.approx((1 + 2) / (6 + 10))  # pad slots / all slots
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_out, batch.tgt_out) and moved.padding_ratio == batch.padding_ratio
    with pytest.raises(ValueError, match="at least one example"):
        pad_batch([])


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.tuples(st.integers(2, 40), st.integers(2, 40)), min_size=1, max_size=60),
       max_tokens=st.integers(1, 200), seed=st.integers(0, 3))
def test_every_example_once_and_within_max_tokens(lengths, max_tokens, seed):
    examples = numbered(lengths)
    batcher = TokenBatcher(examples, max_tokens, seed=seed)
    for _ in range(2):  # two epochs
        batches = list(batcher)
        assert len(batches) == len(batcher.epoch_batches(batcher.epoch - 1))
        assert sorted(i for b in batches for i in ids_of(b)) == list(range(len(examples)))
        for b in batches:
            slots = b.src.size(0) * max(b.src.size(1), b.tgt_in.size(1) + 1)
            assert slots <= max_tokens or b.src.size(0) == 1  # only a lone over-long example may exceed
    assert batcher.epoch == 2


def test_over_long_example_gets_its_own_batch():
    examples = numbered([(3, 3)] * 10 + [(50, 4)])
    batches = list(TokenBatcher(examples, max_tokens=20, seed=0))
    alone = [b for b in batches if 10 in ids_of(b)]
    assert len(alone) == 1 and len(ids_of(alone[0])) == 1
    assert sum(len(ids_of(b)) for b in batches) == 11


def test_batches_group_similar_lengths_and_epochs_differ():
    rng = random.Random(0)
    examples = numbered([(rng.randint(3, 30), rng.randint(3, 30)) for _ in range(500)])
    batcher = TokenBatcher(examples, max_tokens=300, seed=5)
    first, second = [ids_of(b) for b in batcher], [ids_of(b) for b in batcher]
    assert first != second  # a new shuffle each epoch:
    assert sorted(map(sorted, first)) != sorted(map(sorted, second))  # equal lengths meet new neighbours,
    longest = [max(len(examples[i].src) for i in batch) for batch in first]
    assert longest != sorted(longest)  # and an epoch does not run from short to long sentences
    assert [ids_of(b) for b in TokenBatcher(examples, 300, seed=5)] == first  # but the same per (seed, epoch)
    ordered = [ids_of(b) for b in TokenBatcher(examples, 300, shuffle=False)]
    src_lengths = [len(examples[i].src) for batch in ordered for i in batch]
    assert src_lengths == sorted(src_lengths)


def test_state_dict_resumes_mid_epoch():
    rng = random.Random(1)
    examples = numbered([(rng.randint(3, 20), rng.randint(3, 20)) for _ in range(200)])
    batcher = TokenBatcher(examples, max_tokens=120, seed=3)
    stream = batcher.batches_forever()
    n = len(batcher)
    for _ in range(n + 4):  # into the second epoch
        next(stream)
    state = batcher.state_dict()
    assert (state["epoch"], state["position"]) == (1, 4)
    expected = [ids_of(next(stream)) for _ in range(n)]  # the rest of epoch 1 and the start of epoch 2
    resumed = TokenBatcher(examples, max_tokens=120, seed=3)
    resumed.load_state_dict(state)
    got = resumed.batches_forever()
    assert [ids_of(next(got)) for _ in range(n)] == expected
    with pytest.raises(ValueError, match="max_tokens=120 but this batcher has 99"):
        TokenBatcher(examples, max_tokens=99).load_state_dict(state)


def test_state_saved_at_epoch_end_starts_next_epoch():
    examples = numbered([(4, 4)] * 30)
    batcher = TokenBatcher(examples, max_tokens=40, seed=0)
    stream = iter(batcher)
    for _ in range(len(batcher)):
        next(stream)
    resumed = TokenBatcher(examples, max_tokens=40, seed=0)
    resumed.load_state_dict(batcher.state_dict())  # epoch 0, every batch handed out
    assert ids_of(next(resumed.batches_forever())) == resumed.epoch_batches(1)[0] and resumed.epoch == 1


def test_sentence_batches():
    examples = numbered([(i % 7 + 2, i % 5 + 2) for i in range(25)])
    batches = sentence_batches(examples, batch_size=8, seed=1)
    assert [b.src.size(0) for b in batches] == [8, 8, 8, 1]
    assert sorted(i for b in batches for i in ids_of(b)) == list(range(25))
    assert [ids_of(b) for b in sentence_batches(examples, 8, shuffle=False)][0] == list(range(8))


def test_bad_arguments():
    examples = numbered([(3, 3)])
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
            TokenBatcher(examples, bad)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        sentence_batches(examples, 0)
    with pytest.raises(ValueError, match="no examples to batch"):
        TokenBatcher([], 100)


def test_token_batching_pads_less_than_sentence_batches_on_multi30k(multi30k):
    corpus = load_corpus(f"files:{multi30k}", limit=5000)
    tokenizer = Tokenizer.train([s for pair in corpus.train for s in pair], 8000, "word")
    examples, dropped = encode_pairs(corpus.train, tokenizer, max_len=128)
    assert dropped == 0 and len(examples) == 5000

    def padding(batches) -> float:  # over the epoch: each batch's ratio weighted by its slots
        slots = [b.src.numel() + b.tgt_in.size(0) * (b.tgt_in.size(1) + 1) for b in batches]
        return sum(b.padding_ratio * n for b, n in zip(batches, slots)) / sum(slots)

    bucketed = padding(list(TokenBatcher(examples, max_tokens=2000)))
    random_batches = padding(sentence_batches(examples, batch_size=64))
    assert random_batches > 0.3 and bucketed < random_batches / 4  # measured: about 0.08 and 0.48
