"""core.inference.stepwise_beam.BeamStepper: run to the end it equals one-shot beam search exactly; back(),
reset() and the per-step views (candidates kept/pruned, live and finished hypotheses,
cross-attention)."""
from __future__ import annotations

import random

import pytest
import torch

from core.data.tokenizer import BOS_ID
from core.inference.beam_search import beam_search
from core.inference.options import DecodeOptions
from core.inference.step_rules import length_penalty
from core.inference.stepwise_beam import BeamStepper
from core.inference.translation import translate_detailed
from tests.helpers.models import reverse_task, tiny_bundle


@pytest.fixture(scope="module")
def bundle():
    return tiny_bundle()


OPTIONS = [DecodeOptions(), DecodeOptions(beam_size=3, alpha=1.0, length_penalty="plain"),
           DecodeOptions(beam_size=5, no_repeat_ngram=2, min_len=4), DecodeOptions(beam_size=2, max_len_b=4)]


@pytest.mark.parametrize("options", OPTIONS)
def test_run_to_end_equals_one_shot_beam_search(bundle, options):
    rng = random.Random(1)
    for text in [reverse_task(rng)[0] for _ in range(4)] + ["a a b b a a"]:
        stepper = BeamStepper(bundle, text, options)
        stepper.run_to_end()
        src = torch.tensor([stepper.source.ids])
        [expected] = beam_search(bundle.model, src, stepper.max_output, options, n_best=options.beam_size)
        assert stepper.hypotheses() == expected  # ids, token log-probs and scores, exactly
        [translation] = translate_detailed(bundle, [text], options, n_best=options.beam_size)
        assert [(h.score) for h in stepper.hypotheses()] == [s for _, s in translation.n_best]
        assert [h.ids for h in stepper.view.finished] == [h.ids for h in expected]


def test_views_describe_each_step(bundle):
    k = 3
    stepper = BeamStepper(bundle, "a b c d", beam_size=k)
    start = stepper.view
    assert start.step == 0 and [h.ids for h in start.live] == [[]] and not start.done
    assert "2·beam = 6" in start.explanation
    previous = start
    while not stepper.done:
        view = stepper.step()
        assert view.step == previous.step + 1 and len(view.candidates) <= 2 * k
        assert [c.logprob for c in view.candidates] == sorted((c.logprob for c in view.candidates), reverse=True)
        for c in view.candidates:
            parent = previous.live[c.parent]
            assert c.logprob == pytest.approx(parent.logprob + c.token_logprob, abs=1e-5)
            assert c.score == pytest.approx(c.logprob / length_penalty(view.step, DecodeOptions()), abs=1e-6)
        live = [c for c in view.candidates if c.status == "live"]
        assert [previous.live[c.parent].ids + [c.token_id] for c in live] == [h.ids for h in view.live]
        assert len(view.live) == (0 if view.done else k)
        new_finished = len(view.finished) - len(previous.finished)
        pruned = sum(c.status == "pruned" for c in view.candidates)
        assert (f"{len(view.live)} stay live, {new_finished} finished with <eos>, {pruned} pruned."
                in view.explanation)  # a finished hypothesis is not counted as kept in the beam
        for h in view.live + view.finished:
            assert len(h.cross_attention) == bundle.model.config.decoder_layers
            for layer in h.cross_attention:
                assert layer.shape == (bundle.model.config.n_heads, len(stepper.source_tokens))
                assert torch.allclose(layer.sum(-1), torch.ones(layer.size(0)))
        assert len(view.finished) >= len(previous.finished)
        previous = view
    assert len(previous.finished) == k and all(h.ids[-1] == 2 for h in previous.finished)
    assert previous.finished[0].tokens[:-1] == ["d", "c", "b", "a"]
    # Early stopping: done once beam-many hypotheses finished, long before the maximum length.
    assert previous.step < stepper.max_output - 10


def test_each_hypothesis_shows_its_own_cross_attention(bundle):
    """A hypothesis's attention at a step is what the decoder computed for its own prefix: the full
    model run on that prefix gives the same weights in its last row."""
    stepper = BeamStepper(bundle, "a b c d e", beam_size=3)
    src = torch.tensor([stepper.source.ids])
    while not stepper.done:
        view = stepper.step()
        for h in view.live + view.finished:
            prefix = torch.tensor([[BOS_ID] + h.ids[:-1]])
            with torch.no_grad():
                _, attention = bundle.model(src, prefix, return_attention=True)
            for mine, full in zip(h.cross_attention, attention["cross"], strict=True):
                torch.testing.assert_close(mine, full[0, :, -1], atol=1e-5, rtol=1e-4)


def test_back_reset_and_no_ops(bundle):
    stepper = BeamStepper(bundle, "a b c")
    start = stepper.view
    assert stepper.back() is start  # nothing to rewind
    first = stepper.step()
    second = stepper.step()
    assert stepper.back() is first
    again = stepper.step()
    assert again == second  # ids and scores (attention tensors are not compared)
    end = stepper.run_to_end()
    assert stepper.done and stepper.step() is end
    assert stepper.reset() is stepper.view and stepper.view.step == 0 and not stepper.done
    assert stepper.back().step == 0  # reset forgot the steps taken: nothing to rewind
    stepper.run_to_end()
    assert stepper.hypotheses() and [h.ids for h in stepper.view.finished] == [h.ids for h in end.finished]


def test_empty_and_unknown_input(bundle):
    empty = BeamStepper(bundle, "   ")
    assert empty.done and empty.notices == ["empty input"] and empty.hypotheses() == []
    assert empty.step() is empty.view
    odd = BeamStepper(bundle, "a ü b")
    assert "1 unknown piece mapped to <unk>: 'ü'" in odd.notices
    assert odd.run_to_end().finished


def test_maximum_output_counts_the_source_with_its_eos(bundle):
    assert BeamStepper(bundle, "a b c", max_len_a=1.0, max_len_b=0).max_output == 4


def test_bad_options_raise(bundle):
    with pytest.raises(ValueError, match="beam_size"):
        BeamStepper(bundle, "a b", beam_size=0)
