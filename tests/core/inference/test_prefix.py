"""Issue 41: prefix decoding. The output begins with the forced prefix for greedy, beam and sampling; the
forced tokens carry the model's own log-probabilities; what the tokenizer cannot form is refused."""
from __future__ import annotations

import pytest
import torch

import core
from core.inference.greedy import greedy_decode
from core.inference.prefix import prefix_ids
from core.inference.scoring import score
from tests.helpers.models import tiny_bundle

METHODS = ("greedy", "beam", "sample")



@pytest.mark.parametrize("method", METHODS)
def test_the_output_starts_with_the_prefix(shipped, method):
    sources = shipped.info["examples"][:4]
    results = core.translate_detailed(shipped, sources, method=method, prefix="Two young", seed=0)
    for result in results:
        assert result.text.startswith("Two young") and result.tokens[:2] == ["▁Two", "▁young"]
        assert result.prefix_length == 2 and (result.notices == [] or method == "sample")
    assert core.translate(shipped, sources[:2], method=method, prefix="Two young", seed=0)[0].startswith("Two young")


@pytest.mark.parametrize("method", METHODS)
def test_each_sentence_may_have_its_own_prefix_and_an_empty_one_forces_nothing(numbers, method):
    sources = ["twenty - one", "9 7", "three hundred"]
    free = core.translate_detailed(numbers, sources, method=method, seed=1)
    forced = core.translate_detailed(numbers, sources, method=method, seed=1, prefix=["acht", "", "drei hundert"])
    assert forced[0].text.startswith("acht ") and forced[0].prefix_length == 1
    assert forced[1].ids == free[1].ids and forced[1].prefix_length == 0
    assert forced[2].text.startswith("drei hundert") and forced[2].prefix_length == 2


@pytest.mark.parametrize("bundle_name", ["shipped", "numbers"])
def test_a_prefix_equal_to_the_greedy_start_leaves_greedy_unchanged(bundle_name, request):
    bundle = request.getfixturevalue(bundle_name)
    sources = bundle.info["examples"]
    for source, greedy in zip(sources, core.translate_detailed(bundle, sources, method="greedy")):
        start = " ".join(greedy.text.split()[:2])
        [again] = core.translate_detailed(bundle, [source], method="greedy", prefix=start)
        assert again.ids == greedy.ids and again.notices == greedy.notices
        assert again.token_logprobs == pytest.approx(greedy.token_logprobs, abs=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_the_forced_tokens_log_probabilities_are_the_models_own(shipped, method):
    """Teacher forcing (core.score) of the output gives back every token's log-probability, the
    forced ones included, although the model would not have chosen them itself."""
    sources = shipped.info["examples"][:3]
    results = core.translate_detailed(shipped, sources, method=method, prefix="Three old", seed=2)
    scores = score(shipped, sources, [r.ids for r in results])
    for result, scored in zip(results, scores):
        assert result.token_logprobs == pytest.approx(scored.token_logprobs, abs=1e-5)
        assert max(scored.ranks[:2]) > 1  # forced: not what the model would write there


def test_beam_keeps_the_prefix_in_every_hypothesis_and_scores_it():
    bundle = tiny_bundle()
    [result] = core.translate_detailed(bundle, ["a b c d"], method="beam", beam_size=3, n_best=3, prefix="a")
    assert all(text.startswith("a") for text, _ in result.n_best) and len(result.n_best) == 3
    [beam_one] = core.translate_detailed(bundle, ["a b c d"], method="beam", beam_size=1, prefix="a")
    [greedy] = core.translate_detailed(bundle, ["a b c d"], method="greedy", prefix="a")
    assert beam_one.ids == greedy.ids  # the forced token's log-probability counts in the beam's score:
    assert beam_one.token_logprobs == pytest.approx(greedy.token_logprobs, abs=1e-5)
    assert beam_one.score == pytest.approx(sum(greedy.token_logprobs) / ((5 + len(greedy.token_logprobs)) / 6) ** 0.6)


def test_whitespace_is_read_as_single_spaces_and_a_prefix_must_be_writable(shipped):
    tokenizer = shipped.tokenizer
    spaced = prefix_ids(tokenizer, "  Two   young ")
    assert spaced == tokenizer.encode("Two young") == prefix_ids(tokenizer, "Two young")
    assert prefix_ids(tokenizer, " \t ") == []
    with pytest.raises(ValueError, match="prefix 'Ææ 漢字': this model's vocabulary cannot write 'Æ'.*<unk>"):
        core.translate(shipped, ["Ein Hund."], prefix="Ææ 漢字")
    with pytest.raises(ValueError, match=r"prefix\[1\] 'Ø': this model's vocabulary cannot write"):
        core.translate(shipped, ["Ein Hund.", "Eine Katze."], prefix=["A", "Ø"])
    with pytest.raises(ValueError, match="lone surrogate"):
        core.translate(shipped, ["Ein Hund."], prefix="A \udcff")


def test_a_prefix_cut_inside_a_word_gets_a_notice_when_the_model_finishes_the_word(shipped):
    [result] = core.translate_detailed(shipped, [shipped.info["examples"][0]], method="greedy", prefix="A wom")
    assert result.tokens[:3] == ["▁A", "▁wom", "an"]  # "woman" is one token, ▁woman, to the tokenizer
    assert any("continues the prefix's last word" in n and "whole words" in n for n in result.notices)


def test_bad_prefix_arguments_are_refused_in_words(shipped):
    with pytest.raises(ValueError, match="prefix has 1 entries but there are 2 sentences"):
        core.translate(shipped, ["Ein Hund.", "Eine Katze."], prefix=["A"])
    with pytest.raises(TypeError, match="prefix must be a str .* got int"):
        core.translate(shipped, ["Ein Hund."], prefix=3)
    with pytest.raises(TypeError, match=r"prefix\[0\] must be a str, got NoneType"):
        core.translate(shipped, ["Ein Hund."], prefix=[None])
    with pytest.raises(ValueError, match="prefix is 300 tokens, but this model writes at most 254 tokens and <eos>"):
        core.translate(shipped, ["Ein Hund."], prefix="dog " * 300)


def test_the_output_limit_grows_to_hold_a_long_prefix(numbers):
    [result] = core.translate_detailed(numbers, ["9 7"], method="greedy", max_len_a=0, max_len_b=1,
                                       prefix="sieben und")
    assert result.text == "sieben und" and result.prefix_length == 2
    assert any(n.startswith("maximum output length raised from 1 to 3 tokens") for n in result.notices)


def test_tensor_level_decoders_refuse_a_prefix_without_room_for_eos():
    model = tiny_bundle().model
    src = torch.tensor([[4, 5, 2]])
    with pytest.raises(ValueError, match="prefix 0 has 3 tokens, which leaves no room for <eos> in a maximum output "
                                         "length of 3"):
        greedy_decode(model, src, 3, prefix=torch.tensor([[4, 5, 6]]))
    with pytest.raises(ValueError, match="one row per source"):
        greedy_decode(model, src, 3, prefix=torch.tensor([4, 5]))
