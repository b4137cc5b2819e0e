"""Issue 41: scoring a given target by teacher forcing (core.score). The model's own greedy output scores
exactly as the greedy decoder scored it, token by token, each at rank 1; a wrong translation scores lower."""
from __future__ import annotations

import math

import pytest

import core
from core.inference.scoring import EMPTY_TARGET, prepare_pair
from tests.helpers.models import tiny_bundle


@pytest.mark.parametrize("bundle_name", ["shipped", "numbers"])
def test_the_greedy_output_scores_as_the_greedy_decoder_scored_it(bundle_name, request):
    bundle = request.getfixturevalue(bundle_name)
    sources = bundle.info["examples"]
    greedy = core.translate_detailed(bundle, sources, method="greedy")
    for target in ([g.ids for g in greedy], [g.text for g in greedy]):  # ids, and the text re-tokenized
        scores = core.score(bundle, sources, target, batch_size=4)  # two batches, padded
        for g, s in zip(greedy, scores):
            assert s.ids == g.ids + [2] and s.tokens == g.tokens + ["<eos>"]
            assert s.token_logprobs == pytest.approx(g.token_logprobs, abs=1e-5)
            assert s.ranks == [1] * len(s.ids)
            assert [top for top, _ in (a[0] for a in s.alternatives)] == s.tokens  # its own token is the top one
            assert s.sum == pytest.approx(g.score, abs=1e-4) and s.source_tokens == g.source_tokens


def test_figures_follow_from_the_token_log_probabilities(shipped):
    [s] = core.score(shipped, ["Ein Hund läuft."], ["A dog is running."], top_k=3)
    assert s.sum == pytest.approx(math.fsum(s.token_logprobs))
    assert s.mean == pytest.approx(s.sum / len(s.tokens)) and s.perplexity == pytest.approx(math.exp(-s.mean))
    assert s.mean_rank == pytest.approx(sum(s.ranks) / len(s.ranks))
    for alternatives, rank, lp in zip(s.alternatives, s.ranks, s.token_logprobs):
        assert len(alternatives) == 3 and [p for _, p in alternatives] == sorted((p for _, p in alternatives),
                                                                                reverse=True)
        assert (rank == 1) == (alternatives[0][1] == pytest.approx(math.exp(lp)))
    [bare] = core.score(shipped, ["Ein Hund läuft."], ["A dog is running."], top_k=0)
    assert bare.alternatives == [[]] * len(bare.tokens) and bare.token_logprobs == s.token_logprobs


def test_a_wrong_translation_scores_lower(shipped):
    source = "Ein brauner Hund rennt durch den Schnee."
    right, wrong, shuffled = core.score(shipped, [source] * 3, ["A brown dog runs through the snow.",
                                                                 "A green cat sleeps on the sofa.",
                                                                 "snow the through runs dog brown A."])
    assert right.sum > wrong.sum + 10 and right.sum > shuffled.sum + 10
    assert right.perplexity < wrong.perplexity and right.mean_rank < wrong.mean_rank


def test_the_tiny_model_scores_its_task():
    bundle = tiny_bundle()
    right, wrong = core.score(bundle, ["a b c d", "a b c d"], ["d c b a", "a b c d"])
    assert right.ranks == [1] * 5 and right.sum > wrong.sum


def test_an_empty_target_scores_eos_alone_and_an_empty_source_scores_nothing(shipped):
    empty_target, empty_source = core.score(shipped, ["Ein Hund.", "  "], ["", "A dog."])
    assert empty_target.tokens == ["<eos>"] and len(empty_target.token_logprobs) == 1
    assert empty_target.notices == [EMPTY_TARGET] and empty_target.sum < -5  # a sentence is expected
    assert empty_source.tokens == [] and math.isnan(empty_source.sum) and math.isnan(empty_source.perplexity)
    assert empty_source.notices == ["empty input"]
    assert core.score(shipped, ["Ein Hund."], [[]])[0].notices == [EMPTY_TARGET]


def test_too_long_inputs_are_cut_with_a_notice(numbers):
    [s] = core.score(numbers, ["one " * 300], ["eins " * 300])
    assert len(s.tokens) == 255 and s.tokens[-1] == "<eos>"  # max_len 256: <bos> and 254 tokens, then <eos>
    assert any(n.startswith("source truncated from 300 to 255 tokens") for n in s.notices)
    assert "target truncated from 300 to 254 tokens (the model's max_len is 256 with <bos>); <eos> is scored " \
           "after the cut" in s.notices


def test_unknown_pieces_in_the_target_are_noted(shipped):
    [s] = core.score(shipped, ["Ein Hund."], ["A dog 漢."])
    assert "<unk>" in s.tokens and any(n.startswith("target: 1 unknown piece mapped to <unk>: '漢'") for n in s.notices)


def test_bad_input_is_refused_in_one_line(shipped):
    with pytest.raises(ValueError, match="2 sources but 1 targets; they must pair up one to one"):
        core.score(shipped, ["a", "b"], ["c"])
    with pytest.raises(TypeError, match=r"sources\[1\] must be a str, got int"):
        core.score(shipped, ["a", 3], ["c", "d"])
    with pytest.raises(TypeError, match=r"pair 1 \(sources\[1\], targets\[1\]\): a target must be a str or a list "
                                        r"of token ids, got float"):
        core.score(shipped, ["a", "b"], ["c", 2.5])
    with pytest.raises(ValueError, match=r"pair 0 .*target token ids must be integers from 3 to 7999 \(no <pad>, "
                                         r"<bos> or <eos>\); got 2"):
        core.score(shipped, ["a"], [[5, 2]])
    with pytest.raises(TypeError, match="sources must be a list of str, not a single str"):
        core.score(shipped, "a", ["b"])
    with pytest.raises(ValueError, match="top_k must be an integer >= 0; got -1"):
        core.score(shipped, ["a"], ["b"], top_k=-1)
    with pytest.raises(ValueError, match="top_k must be at most 7998"):
        core.score(shipped, ["a"], ["b"], top_k=8000)
    with pytest.raises(TypeError, match="bundle must be a ModelBundle"):
        core.score(None, ["a"], ["b"])


def test_scoring_leaves_the_model_as_it_was(shipped):
    shipped.model.train()
    try:
        first, = core.score(shipped, ["Ein Hund."], ["A dog."])
        again, = core.score(shipped, ["Ein Hund."], ["A dog."])
        assert first.token_logprobs == again.token_logprobs  # eval mode inside: no dropout
        assert shipped.model.training
    finally:
        shipped.model.eval()


def test_prepare_pair_reads_a_pair_as_the_decoders_do(shipped):
    pair = prepare_pair(shipped, "Ein Hund.", "A dog.")
    assert pair.src == shipped.tokenizer.encode("Ein Hund.") + [2] and pair.tgt_in == [1] + pair.tgt[:-1]
    assert pair.tokens[-1] == "<eos>" and pair.source_tokens[-1] == "<eos>" and not pair.empty


def test_on_batch_counts_every_pair_once(shipped):
    counts = []
    core.score(shipped, ["Ein Hund.", "", "Eine Katze.", "Ein Haus."], ["A dog.", "x", "A cat.", "A house."],
               batch_size=2, on_batch=counts.append)
    assert counts == [1, 2, 1]  # the empty source first, then the batches
