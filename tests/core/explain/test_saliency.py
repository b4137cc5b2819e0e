"""Issue 41: gradient attributions on the source embeddings, alignments from cross-attention, and their
rank correlation. The batched gradients equal a plain loop over target tokens and integration points;
integrated gradients are complete (each row sums to f(x) - f(baseline)). Issue 51: their agreement is
whether the most-attributed source word is the most-attended one, sound on a short sentence where
Spearman's rho is not, which is given only from MIN_RANKED source words up."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from core.explain import saliency
from core.explain.hooks import attention_maps
from core.inference.scoring import prepare_pair, score
from tests.helpers.models import tiny_bundle

PAIR = ("Zwei junge Männer spielen Fußball.", "Two young men are playing soccer.")



# ----- plain reference: one forward and one backward pass per target token and integration point ------
def log_prob(model, src: list[int], tgt: list[int], t: int, embeddings: torch.Tensor) -> torch.Tensor:
    tgt_in = torch.tensor([[model.config.bos_id] + tgt[:t]])
    hidden = model.hidden(torch.tensor([src]), tgt_in, src_embeddings=embeddings[None])
    return model.project(hidden[-1]).float().log_softmax(-1)[tgt[t]]


def reference(bundle, source, target, alphas: list[float]) -> np.ndarray:
    model = bundle.model.eval()
    pair = prepare_pair(bundle, source, target)
    e = model.src_embed(torch.tensor(pair.src)).detach()
    rows = []
    for t in range(len(pair.tgt)):
        total = torch.zeros_like(e)
        for alpha in alphas:
            point = (alpha * e).requires_grad_(True)
            total += torch.autograd.grad(log_prob(model, pair.src, pair.tgt, t, point), point)[0]
        rows.append((total / len(alphas) * e).sum(-1))
    return torch.stack(rows).double().numpy()


def test_grad_x_input_equals_the_plain_loop(shipped, numbers):
    for bundle, (source, target) in ((shipped, PAIR), (numbers, ("twenty - one", "ein und zwanzig"))):
        fast = saliency.attribution(bundle, source, target, "grad_x_input", normalize=False)
        np.testing.assert_allclose(fast, reference(bundle, source, target, [1.0]), rtol=1e-4, atol=1e-5)


def test_integrated_gradients_equal_the_plain_loop(numbers):
    source, target = "three hundred twenty - one", "drei hundert ein und zwanzig"
    fast = saliency.attribution(numbers, source, target, "integrated_gradients", steps=4, normalize=False)
    expected = reference(numbers, source, target, [0.125, 0.375, 0.625, 0.875])
    np.testing.assert_allclose(fast, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bundle_name", ["shipped", "numbers"])
def test_integrated_gradients_are_complete(bundle_name, request):
    """Sundararajan et al.'s completeness: a row sums to f(x) - f(baseline), the baseline being zero source
    token embeddings (positions kept)."""
    bundle = request.getfixturevalue(bundle_name)
    source, target = PAIR if bundle_name == "shipped" else ("9 7", "sieben und neunzig")
    raw = saliency.attribution(bundle, source, target, "integrated_gradients", steps=64, normalize=False)
    pair = prepare_pair(bundle, source, target)
    model = bundle.model
    with torch.no_grad():
        e = model.src_embed(torch.tensor(pair.src))
        at_x = [float(log_prob(model, pair.src, pair.tgt, t, e)) for t in range(len(pair.tgt))]
        gap = [f - float(log_prob(model, pair.src, pair.tgt, t, 0 * e)) for t, f in enumerate(at_x)]
    assert score(bundle, [source], [target])[0].token_logprobs == pytest.approx(at_x, abs=1e-5)  # f is log P
    np.testing.assert_allclose(raw.sum(axis=1), gap, rtol=0.02, atol=0.02)


def test_rows_are_normalised_to_absolute_sum_one_and_keep_their_sign(shipped):
    raw = saliency.attribution(shipped, *PAIR, normalize=False)
    normal = saliency.attribution(shipped, *PAIR)
    [scored] = score(shipped, [PAIR[0]], [PAIR[1]])
    assert normal.shape == (len(scored.tokens), len(scored.source_tokens)) and normal.dtype == np.float64
    np.testing.assert_allclose(np.abs(normal).sum(axis=1), 1.0)
    assert (np.sign(normal) == np.sign(raw)).all()


def test_the_models_mode_is_restored_and_no_weight_gets_a_gradient(numbers):
    model = numbers.model
    model.train()
    try:
        with torch.no_grad():  # a caller's no_grad does not stop the attribution
            first = saliency.attribution(numbers, "9 7", "sieben und neunzig")
        assert model.training and all(p.grad is None for p in model.parameters())
        np.testing.assert_array_equal(first, saliency.attribution(numbers, "9 7", "sieben und neunzig"))
    finally:
        model.eval()


def test_bad_arguments_are_refused_in_words(shipped):
    with pytest.raises(ValueError, match="unknown attribution method 'saliency'; allowed: grad_x_input, "
                                         "integrated_gradients"):
        saliency.attribution(shipped, *PAIR, method="saliency")
    with pytest.raises(ValueError, match="steps must be an integer >= 1; got 0"):
        saliency.attribution(shipped, *PAIR, method="integrated_gradients", steps=0)
    with pytest.raises(ValueError, match="is empty: there is nothing to attend to or attribute"):
        saliency.attribution(shipped, " ", "A dog.")
    with pytest.raises(ValueError, match=r"layer 3 is out of range: this model's decoder has 3 layers \(0..2, or "
                                         r"-3..-1 from the last\)"):
        saliency.alignment(shipped, *PAIR, layer=3)
    with pytest.raises(ValueError, match="same .* shape"):
        saliency.rank_correlation(np.zeros((2, 3)), np.zeros((3, 2)))


def test_a_truncated_target_is_said_with_a_warning(numbers):
    with pytest.warns(UserWarning, match="target truncated from 300 to 254 tokens"):
        saliency.cross_attention(numbers, "9 7", "eins " * 300)


def test_cross_attention_rows_are_distributions_over_the_source(shipped):
    attention = saliency.cross_attention(shipped, *PAIR, layer=0)
    [scored] = score(shipped, [PAIR[0]], [PAIR[1]])
    assert attention.shape == (len(scored.tokens), len(scored.source_tokens))
    np.testing.assert_allclose(attention.sum(axis=1), 1.0, atol=1e-5)
    pair = prepare_pair(shipped, *PAIR)
    maps = attention_maps(shipped.model, pair.src, pair.tgt_in)["cross"]
    np.testing.assert_allclose(saliency.cross_attention(shipped, *PAIR), maps[-1].mean(0).numpy(), atol=1e-7)


def test_alignment_is_fairseqs_argmax_of_the_last_layer_without_eos(numbers):
    # The numbers task's alignment crosses: "ein" (one) comes before "zwanzig" (twenty).
    links = saliency.alignment(numbers, "twenty - one", "ein und zwanzig")
    attention = saliency.cross_attention(numbers, "twenty - one", "ein und zwanzig")
    assert links == [(int(attention[t, :-1].argmax()), t) for t in range(3)]
    assert [t for _, t in links] == [0, 1, 2] and all(s < 3 for s, _ in links)  # <eos> on neither side
    with pytest.warns(UserWarning, match="empty target: only <eos> is scored"):
        assert saliency.alignment(numbers, "9 7", "") == []


def test_a_reversing_models_alignment_is_the_anti_diagonal():
    bundle = tiny_bundle()  # learnt to reverse letters: the last one is written first
    links = [saliency.alignment(bundle, "a b c d e", "e d c b a", layer=layer) for layer in (0, 1)]
    assert [(4, 0), (3, 1), (2, 2), (1, 3), (0, 4)] in links


def test_rank_correlation_is_spearmans_with_average_ranks_for_ties():
    a = np.array([[1.0, 2.0, 3.0, 4.0], [0.1, 0.5, 0.5, 0.2], [3.0, 3.0, 3.0, 3.0], [4.0, 1.0, 3.0, 2.0]])
    b = np.array([[10.0, 20.0, 30.0, 40.0], [1.0, 3.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    rho = saliency.rank_correlation(a, b)
    assert rho[0] == pytest.approx(1.0) and math.isnan(rho[2]) and rho[3] == pytest.approx(-0.4)
    # row 1: ranks (1, 3.5, 3.5, 2) and (1, 4, 2.5, 2.5), Pearson of those
    ra, rb = np.array([1, 3.5, 3.5, 2]), np.array([1, 4, 2.5, 2.5])
    assert rho[1] == pytest.approx(np.corrcoef(ra, rb)[0, 1])
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, (5, 9)).astype(float), rng.normal(size=(5, 9))
    assert saliency.rank_correlation(x, y) == pytest.approx([scipy_stats.spearmanr(u, v)[0] for u, v in zip(x, y)])


def test_attributions_and_attention_agree_more_than_chance_on_the_shipped_model(shipped):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean pair: no notice
        attribution, attention = saliency.attribution(shipped, *PAIR), saliency.cross_attention(shipped, *PAIR)
    [scored] = score(shipped, [PAIR[0]], [PAIR[1]])
    c = saliency.compare(attribution, attention, scored.source_tokens, scored.tokens)
    assert c.compared == len(scored.tokens) - 1 and c.fraction > 2 * c.chance


# ----- agreement (issue 51) --------------------------------------------------------------------------------
def test_top_tokens_agree_though_spearman_on_three_words_says_little():
    """Both maps put each row's most weight on the same source word; the order of the small rest differs, as
    noise would. Spearman's rho over the 3 words and <eos> (the old measure) makes that 0.2 a row; compare
    counts every row as agreeing, and gives no rho for 3 words."""
    source, target = ["▁Zwei", "▁Hunde", "▁spielen", "<eos>"], ["▁Two", "▁dogs", "▁play", "<eos>"]
    attribution = np.array([[0.70, 0.10, 0.15, -0.05], [-0.12, -0.75, 0.08, 0.05],
                            [0.05, 0.20, 0.60, -0.15], [0.2, 0.1, 0.3, 0.4]])
    attention = np.array([[0.60, 0.05, 0.02, 0.33], [0.01, 0.66, 0.09, 0.24],
                          [0.20, 0.01, 0.61, 0.18], [0.1, 0.1, 0.1, 0.7]])
    old = saliency.rank_correlation(np.abs(attribution), attention)[:3]
    assert old == pytest.approx([0.2, 0.2, 0.2])
    c = saliency.compare(attribution, attention, source, target)
    assert c.agreed == c.compared == 3 and c.fraction == 1.0 and math.isnan(c.top[3])  # the <eos> row aside
    assert list(c.top_attributed[:3]) == list(c.top_attended[:3]) == [0, 1, 2] and c.top_attributed[3] == -1
    assert c.words == 3 and c.chance == pytest.approx(1 / 3)
    assert np.isnan(c.rho).all() and math.isnan(c.mean_rho)  # too few words for a rank correlation
    # The attention on the most-attributed word, as a share of the attention on the words (<eos>'s 0.33 out).
    assert c.share[:3] == pytest.approx([0.60 / 0.67, 0.66 / 0.76, 0.61 / 0.82]) and (c.share == c.top_share)[:3].all()


def test_a_disagreement_is_counted_and_shows_how_near_it_came():
    attribution = np.array([[0.5, 0.3, 0.2, 0.0], [0.1, 0.2, 0.7, 0.0]])
    attention = np.array([[0.2, 0.5, 0.1, 0.2], [0.1, 0.1, 0.3, 0.5]])  # row 1: most on <eos>, then the same word
    c = saliency.compare(attribution, attention, ["a", "b", "c", "<eos>"])
    assert list(c.top) == [0.0, 1.0] and c.agreed == 1 and c.compared == 2 and c.fraction == 0.5
    assert list(c.top_attributed) == [0, 2] and list(c.top_attended) == [1, 2]
    assert c.share[0] == pytest.approx(0.2 / 0.8) and c.top_share[0] == pytest.approx(0.5 / 0.8)


def test_the_sign_does_not_matter_and_ties_agree_on_a_maximum_in_common():
    attribution = np.array([[-0.6, 0.3, 0.1], [0.4, 0.4, 0.2]])
    attention = np.array([[0.7, 0.2, 0.1], [0.3, 0.6, 0.1]])
    c = saliency.compare(attribution, attention, ["x", "y", "z"])
    assert list(c.top) == [1.0, 1.0] and list(c.top_attributed) == list(c.top_attended) == [0, 1]


def test_a_row_too_short_gets_no_correlation_and_one_long_enough_gets_spearmans_over_its_words():
    rng = np.random.default_rng(1)
    for words in (saliency.MIN_RANKED - 1, saliency.MIN_RANKED):
        source = ["<2en>"] + [f"w{i}" for i in range(words)] + ["<eos>"]  # a two-way model's tag first
        attribution, attention = rng.normal(size=(4, words + 2)), rng.dirichlet(np.ones(words + 2), size=4)
        c = saliency.compare(attribution, attention, source)
        assert c.words == words and not c.columns[0] and not c.columns[-1]
        if words < saliency.MIN_RANKED:
            assert np.isnan(c.rho).all()
        else:
            expected = saliency.rank_correlation(np.abs(attribution[:, 1:-1]), attention[:, 1:-1])
            assert c.rho == pytest.approx(expected) and c.mean_rho == pytest.approx(expected.mean())


def test_tags_and_control_tokens_are_never_the_top_and_rows_without_words_are_not_measured():
    source, target = ["<2es>", "▁perro", "▁grande", "<eos>"], ["<2es>", "▁big", "<eos>"]
    attribution = np.array([[0.9, 0.05, 0.05, 0.0], [0.8, 0.05, 0.15, 0.0], [0.0, 0.0, 0.0, 1.0]])
    attention = np.array([[0.9, 0.05, 0.05, 0.0], [0.9, 0.01, 0.09, 0.0], [0.0, 0.5, 0.5, 0.0]])
    c = saliency.compare(attribution, attention, source, target)
    assert list(c.measured) == [False, True, False]  # a tag row, a word, and <eos>
    assert c.top_attributed[1] == c.top_attended[1] == 2 and c.share[1] == pytest.approx(0.9)
    zero = saliency.compare(np.zeros((1, 3)), np.full((1, 3), 1 / 3), ["a", "b", "<eos>"])
    assert zero.compared == 0 and math.isnan(zero.fraction)  # nothing attributed: no top to compare
    none = saliency.compare(np.ones((2, 1)), np.ones((2, 1)), ["<eos>"])
    assert none.compared == 0 and none.words == 0 and math.isnan(none.chance)
    assert [saliency.is_word(t) for t in ("<unk>", "<2pt_BR>", "<bos>", "<pad>", "▁<2es")] == [
        True, False, False, False, True]
    with pytest.raises(ValueError, match="same .* shape"):
        saliency.compare(np.zeros((2, 3)), np.zeros((3, 2)), ["a", "b", "c"])
    with pytest.raises(ValueError, match="2 source tokens and no target tokens name a map of shape"):
        saliency.compare(np.zeros((2, 3)), np.zeros((2, 3)), ["a", "b"])


@pytest.mark.parametrize("method", saliency.METHODS)
def test_dogs_agrees_with_hunde_by_both_methods_on_the_shipped_model(shipped, method):
    """Issue 51's complaint: both maps point "dogs" at "Hunde", yet Spearman's rho of its row was 0.03."""
    source, target = "Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."
    [scored] = score(shipped, [source], [target])
    attribution = saliency.attribution(shipped, source, target, method)
    c = saliency.compare(attribution, saliency.cross_attention(shipped, source, target), scored.source_tokens,
                         scored.tokens)
    dogs, hunde = scored.tokens.index("▁dogs"), scored.source_tokens.index("▁Hunde")
    assert c.top[dogs] == 1.0 and c.top_attributed[dogs] == c.top_attended[dogs] == hunde
    assert c.words == 5 and np.isnan(c.rho).all()


def test_source_embeddings_of_the_wrong_shape_are_refused(numbers):
    src, tgt_in = torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7]])
    with pytest.raises(ValueError, match=r"src_embeddings must be \(batch, length, d_model\) = \(1, 3, 64\) like "
                                         r"src's lookup, got \(3, 64\)"):
        numbers.model.hidden(src, tgt_in, src_embeddings=torch.zeros(3, 64))
