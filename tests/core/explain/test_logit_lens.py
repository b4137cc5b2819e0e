"""The logit lens (core/explain/logit_lens.py): the last decoder layer's lens is the model's own output
distribution exactly, post-norm (the shipped model) and pre-norm (through the final LayerNorm); ranks and the layer
where each token is decided."""
from __future__ import annotations

import torch

from core.explain.logit_lens import layer_log_probs, logit_lens
from core.inference.scoring import prepare_pair
from core.inference.steps import inference
from tests.helpers.tiny import tiny

SENTENCE = "Zwei Hunde spielen im Schnee."


def own_distribution(model, src, tgt_in) -> torch.Tensor:
    with inference(model):
        return torch.log_softmax(model(torch.tensor([src]), torch.tensor([tgt_in]))[0].float(), dim=-1)


def test_the_last_layers_lens_is_the_models_output_exactly(shipped):
    pair = prepare_pair(shipped, SENTENCE, "Two dogs are playing in the snow.")
    lens = layer_log_probs(shipped.model, pair.src, pair.tgt_in)
    assert lens.shape == (3, len(pair.tgt), shipped.model.config.tgt_vocab_size)
    assert torch.equal(lens[-1], own_distribution(shipped.model, pair.src, pair.tgt_in))
    assert not torch.allclose(lens[0], lens[-1])


def test_a_pre_norm_models_lens_goes_through_its_final_layernorm():
    model = tiny(norm_first=True)
    with torch.no_grad():
        model.decoder_norm.weight.mul_(3.0)  # a final LayerNorm that is not the identity
    src, tgt_in = [5, 9, 12, 2], [1, 6, 8, 11]
    lens = layer_log_probs(model, src, tgt_in)
    assert torch.equal(lens[-1], own_distribution(model, src, tgt_in))


def test_ranks_and_where_each_token_is_decided(shipped):
    lens = logit_lens(shipped, SENTENCE, top_k=3)
    layers, positions = lens.ranks.shape
    assert (layers, positions) == (3, len(lens.tokens)) and lens.tokens[1] == "▁dogs"
    assert (lens.ranks[-1] == 1).all()  # greedy: the last layer's top token is the one written
    assert [top[0] for top in lens.top_tokens[-1]] == lens.tokens
    assert lens.top_probabilities.shape == (3, positions, 3) and not lens.final_norm
    assert all(d is not None and 0 <= d < layers for d in lens.decided_at)
    assert lens.probabilities[-1, 1] > 0.9 > lens.probabilities[0, 1]  # "dogs": sure at the end, not at first
    cats = logit_lens(shipped, SENTENCE, "Two cats play in the snow.")
    assert cats.ranks[-1, 1] > 1 and cats.decided_at[1] is None
