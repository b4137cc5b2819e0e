"""Why this token and not that one (core/explain/contrast.py): the difference of two candidates' probabilities and
its gradient × input on the source; swapping the candidates negates it, a candidate against itself gives zero;
candidates as words, tokens or ids, each refused by name."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.explain.contrast import candidate, contrast
from core.inference.scoring import prepare_pair

SENTENCE = "Zwei Hunde spielen im Schnee."


def test_dogs_against_cats_beside_the_cross_attention(shipped):
    c = contrast(shipped, SENTENCE, 1, "cats")
    assert (c.token, c.foil, c.objective, c.method) == ("▁dogs", "▁c", "probability", "grad_x_input")
    assert c.notices == ["foil 'cats' is 2 tokens (▁c ats): its first, '▁c', is compared"]
    assert c.probability > 0.9 > c.foil_probability and c.difference == c.probability - c.foil_probability
    assert c.attribution.shape == c.cross_attention.shape == (len(c.source_tokens),)
    assert abs(c.cross_attention.sum() - 1) < 1e-5 and c.cross_attention.argmax() == 1  # "dogs" looks at "Hunde"
    assert abs(np.abs(c.normalized).sum() - 1) < 1e-9


def test_swapping_the_candidates_negates_and_one_against_itself_is_zero(shipped):
    for objective, method in (("probability", "grad_x_input"), ("logit", "integrated_gradients")):
        ab = contrast(shipped, SENTENCE, 2, "▁are", objective=objective, method=method, steps=8)
        ba = contrast(shipped, SENTENCE, 2, "▁play", token="▁are", objective=objective, method=method, steps=8)
        np.testing.assert_allclose(ab.attribution, -ba.attribution, rtol=1e-6, atol=1e-12)
        same = contrast(shipped, SENTENCE, 2, "▁play", objective=objective, method=method, steps=8)
        assert same.difference == 0 and not same.attribution.any()


def test_integrated_gradients_add_up_to_the_difference_and_find_hunde(shipped):
    """Completeness: the attributions sum to f(x) - f(zero token embeddings), up to the midpoint rule; and where
    gradient × input, saturated at p(dogs) = 0.98, puts "Hunde" against "dogs" over "cat", the integral puts it for."""
    c = contrast(shipped, SENTENCE, 1, "cat", method="integrated_gradients", steps=64)
    pair = prepare_pair(shipped, SENTENCE, "Two dogs play in the snow.")  # its greedy translation
    model = shipped.model
    with torch.no_grad():
        zero = model.hidden(torch.tensor([pair.src]), torch.tensor([pair.tgt_in]),
                            src_embeddings=torch.zeros(1, len(pair.src), model.config.d_model))
        p = torch.softmax(model.project(zero[1]).float(), dim=-1)
    a, b = (shipped.target_tokenizer.hf.token_to_id(t) for t in ("▁dogs", "▁cat"))
    assert c.attribution.sum() == pytest.approx(c.difference - float(p[a] - p[b]), abs=0.02)
    assert c.normalized.argmax() == 1 and c.normalized[1] > 0.3
    assert contrast(shipped, SENTENCE, 1, "cat").normalized[1] < 0  # saturation: the gradient's sign misleads


def test_candidates_and_positions_are_refused_by_name(shipped):
    tokenizer = shipped.target_tokenizer
    assert candidate(tokenizer, "▁dogs", "foil") == (tokenizer.hf.token_to_id("▁dogs"), [])
    assert candidate(tokenizer, "dogs", "foil") == (tokenizer.hf.token_to_id("▁dogs"), [])
    assert candidate(tokenizer, "<eos>", "foil") == (2, [])
    for foil, message in [(1, "from 2"), ("  ", "must be a word"), (None, "must be a word")]:
        with pytest.raises(ValueError, match=message):
            contrast(shipped, SENTENCE, 1, foil)
    with pytest.raises(ValueError, match="position must be from 0 to 6"):
        contrast(shipped, SENTENCE, 7, "cats")
    with pytest.raises(ValueError, match="unknown objective"):
        contrast(shipped, SENTENCE, 1, "cats", objective="rank")
    with pytest.raises(ValueError, match="unknown attribution method"):
        contrast(shipped, SENTENCE, 1, "cats", method="lime")
