"""What a knock-out changes (core/explain/knockout_effect.py), on the shipped German→English model: nothing knocked
out changes nothing; the probabilities are core.score's of the intact translation; the neighbour's weights show the
part (a hidden token's column empty, the scale's sharper rows, the mask's upper triangle); a corpus's BLEU and chrF
before and after, with its progress counted."""
from __future__ import annotations

import numpy as np
import pytest

import core
from core.explain.knockout import Knockout
from core.explain.knockout_effect import corpus_effect, knockout_effect, neighbour

SENTENCE = "Zwei Hunde jagen eine Katze."
PAIRS = [("Zwei Hunde jagen eine Katze.", "Two dogs chase a cat."),
         ("Ein Mann fährt Fahrrad.", "A man rides a bike."),
         ("Eine Frau sitzt auf einer Bank.", "A woman sits on a bench."),
         ("Kinder spielen im Schnee.", "Children play in the snow.")]


def test_nothing_knocked_out_changes_nothing(shipped):
    e = knockout_effect(shipped, SENTENCE, Knockout())
    assert e.before.text == e.after.text and not e.changed
    assert np.array_equal(e.probabilities_before, e.probabilities_after)
    assert np.array_equal(e.attention_before, e.attention_after) and e.attention_shift == 0


def test_probabilities_are_the_intact_translations_scored_both_ways(shipped):
    e = knockout_effect(shipped, SENTENCE, positions=False)
    intact = core.score(shipped, [SENTENCE], [e.before.ids])[0]
    assert e.tokens == intact.tokens and e.tokens[-1] == "<eos>"
    np.testing.assert_allclose(e.probabilities_before, np.exp(intact.token_logprobs))
    assert e.changed and e.probabilities_after[1] < 0.5 < e.probabilities_before[1]  # "dogs" is no longer sure
    assert (e.neighbour.stack, e.neighbour.layer) == ("encoder", 0)
    assert e.attention_before.shape == (4, len(e.source_tokens), len(e.source_tokens))


def test_the_neighbours_weights_show_the_part(shipped):
    hidden = knockout_effect(shipped, SENTENCE, hide_source_token=1)
    assert hidden.neighbour.stack == "cross" and np.all(hidden.attention_after[..., 1] == 0)
    assert hidden.attention_before[..., 1].max() > 0.1
    sharp = knockout_effect(shipped, SENTENCE, scale=False)
    assert sharp.entropy[1] < sharp.entropy[0] / 2
    unmasked = knockout_effect(shipped, SENTENCE, causal_mask=False)
    assert unmasked.before.text == unmasked.after.text  # decoding never sees a future
    assert not np.allclose(unmasked.probabilities_before, unmasked.probabilities_after)  # teacher forcing does
    assert np.all(np.triu(unmasked.attention_before, k=1) == 0) and np.triu(unmasked.attention_after, k=1).max() > 0


def test_each_part_has_a_neighbour_that_reads_it(shipped):
    config = shipped.model.config

    def near(knockout: Knockout) -> tuple[str, int]:
        n = neighbour(knockout, config)
        return n.stack, n.layer

    assert near(Knockout(residual="decoder.1.self")) == ("cross", 1)
    assert near(Knockout(layernorm="encoder.0.ffn")) == ("encoder", 1)
    assert near(Knockout(layer="encoder.2")) == ("cross", 0)
    assert near(Knockout(heads={"decoder": {0: [1]}})) == ("cross", 0)
    assert near(Knockout(residual="decoder.2.ffn")) == ("cross", 2)  # nothing reads it but W


def test_bad_input_is_refused_by_name(shipped):
    with pytest.raises(ValueError, match="source is empty"):
        knockout_effect(shipped, "  ", positions=False)
    with pytest.raises(ValueError, match="hide_source_token 40 is past the source's 7 tokens"):
        knockout_effect(shipped, SENTENCE, hide_source_token=40)


def test_a_corpus_before_and_after(shipped):
    seen = []
    intact = corpus_effect(shipped, PAIRS, Knockout(), on_batch=seen.append)
    assert sum(seen) == 2 * len(PAIRS)
    assert intact.before.bleu == intact.after.bleu and intact.changed == 0 and intact.examples == []
    knocked = corpus_effect(shipped, PAIRS, positions=False, examples=2)
    assert knocked.before.bleu == intact.before.bleu and knocked.after.bleu < knocked.before.bleu
    assert knocked.after.chrf < knocked.before.chrf and knocked.before.n == len(PAIRS)
    assert 0 < knocked.changed <= len(PAIRS) and len(knocked.examples) == min(2, knocked.changed)
