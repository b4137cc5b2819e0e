"""core.inference's decoders (beam_search, greedy, sampling), cached and batched, against a naive
full-recompute reference; their equivalences (beam 1 == greedy, batched == alone, top-k 1 sampling ==
greedy), options and bad input; and bench/decode.py's logic on the tiny model."""
from __future__ import annotations

import gzip
import importlib.util
import math
import random
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from core.data.batching import pad_ids
from core.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from core.inference import translation
from core.inference.beam_search import beam_search
from core.inference.greedy import greedy_decode
from core.inference.options import DecodeOptions
from core.inference.sampling import filter_logits, sample
from core.inference.step_rules import _repeated_ngrams, length_penalty
from core.inference.stepwise_beam import BeamStepper
from core.inference.translation import Translation, max_output_length, prepare_source, translate, translate_detailed
from tests.helpers.models import reverse_sources, reverse_task, tiny_bundle

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bundle():
    return tiny_bundle()


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return reverse_sources(10, seed=7)


def encode(bundle, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded source batch and the default maximum output lengths."""
    ids = [prepare_source(bundle.tokenizer, s, bundle.model.config.max_len).ids for s in sentences]
    limits = [max_output_length(len(i), DecodeOptions(), bundle.model.config.max_len)[0] for i in ids]
    return pad_ids(ids), torch.tensor(limits)


# ----- naive reference: re-run model(src, prefix) over the whole prefix every step ------------
def naive_log_probs(model, src: torch.Tensor, prefix: list[int], at_max: bool) -> torch.Tensor:
    with torch.no_grad():
        lp = model(src, torch.tensor([[BOS_ID] + prefix]))[0, -1].log_softmax(-1)
    lp[[PAD_ID, BOS_ID]] = -math.inf
    if at_max:
        lp = torch.where(torch.arange(lp.numel()) == EOS_ID, lp, -math.inf)
    return lp


def naive_greedy(model, src: torch.Tensor, max_out: int) -> list[int]:
    ids: list[int] = []
    while not ids or ids[-1] != EOS_ID:
        ids.append(int(naive_log_probs(model, src, ids, len(ids) + 1 >= max_out).argmax()))
    return ids


def naive_beam(model, src: torch.Tensor, max_out: int, k: int, options: DecodeOptions) -> list[tuple[list[int], float]]:
    beams, finished = [([], 0.0)], []
    for step in range(max_out):
        candidates = []
        for ids, logprob in beams:
            lp = logprob + naive_log_probs(model, src, ids, step + 1 >= max_out)
            candidates += [(float(lp[t]), ids, t) for t in range(lp.numel())]
        candidates = sorted(candidates, key=lambda c: -c[0])[:2 * k]
        beams = [(ids + [t], s) for s, ids, t in candidates if t != EOS_ID][:k]
        finished += [(ids + [t], s / length_penalty(step + 1, options))
                     for s, ids, t in candidates[:k] if t == EOS_ID][:k - len(finished)]
        if len(finished) == k:
            break
    return sorted(finished, key=lambda f: -f[1])


def test_greedy_matches_naive_full_recompute(bundle, sentences):
    src, max_out = encode(bundle, sentences)
    hyps = greedy_decode(bundle.model, src, max_out)
    for row, hyp in enumerate(hyps):
        one = src[row:row + 1, :int((src[row] != PAD_ID).sum())]
        assert hyp.ids == naive_greedy(bundle.model, one, int(max_out[row]))
        assert hyp.score == pytest.approx(sum(hyp.token_logprobs), abs=1e-4)


def test_beam_matches_naive_full_recompute(bundle, sentences):
    options = DecodeOptions(beam_size=3, n_best=3)
    src, max_out = encode(bundle, sentences[:4])
    nbest = beam_search(bundle.model, src, max_out, options)
    for row, hyps in enumerate(nbest):
        one = src[row:row + 1, :int((src[row] != PAD_ID).sum())]
        expected = naive_beam(bundle.model, one, int(max_out[row]), 3, options)
        assert [h.ids for h in hyps] == [ids for ids, _ in expected]
        assert [h.score for h in hyps] == pytest.approx([s for _, s in expected], abs=1e-4)


def test_reverse_model_decodes_sensibly(bundle):
    rng = random.Random(3)
    pairs = [reverse_task(rng) for _ in range(20)]
    out = translate(bundle, [s for s, _ in pairs])
    assert sum(o == t for o, (_, t) in zip(out, pairs)) >= 12


def test_beam_size_one_equals_greedy(bundle, sentences):
    greedy = translate_detailed(bundle, sentences, method="greedy")
    beam = translate_detailed(bundle, sentences, method="beam", beam_size=1)
    assert [b.ids for b in beam] == [g.ids for g in greedy]
    for b, g in zip(beam, greedy):
        assert b.token_logprobs == pytest.approx(g.token_logprobs)


@pytest.mark.parametrize("method", ["beam", "greedy"])
def test_batched_equals_each_sentence_alone(bundle, sentences, method, monkeypatch):
    monkeypatch.setattr(translation, "SOURCE_GROUP", 2)  # batches of 4 sentences encoded in groups of 2
    mixed = sentences + ["", "a b"]
    batched = translate_detailed(bundle, mixed, method=method, n_best=1, batch_size=4)
    for text, result in zip(mixed, batched):
        [alone] = translate_detailed(bundle, [text], method=method)
        assert result.ids == alone.ids
        assert result.score == pytest.approx(alone.score, abs=1e-5)


def test_sampling_with_a_seed_takes_sources_in_groups(bundle, sentences):
    src, max_out = encode(bundle, sentences[:4])
    groups = [src[:2], src[2:]]
    # Each row draws from its own sentence's distribution: cut to its top token, the greedy outputs
    # of the four sentences decoded as one batch.
    assert [h.ids for h in sample(bundle.model, groups, max_out, seed=3, top_k=1, temperature=3.0)] == \
        [h.ids for h in greedy_decode(bundle.model, src, max_out)]
    assert [h.ids for h in sample(bundle.model, groups, max_out, seed=3)] == \
        [h.ids for h in sample(bundle.model, groups, max_out, seed=3)]  # and a seed repeats its draws


def test_batch_size_defaults_to_about_1024_rows():
    assert DecodeOptions(method="greedy").sentences_per_batch == 1024
    assert DecodeOptions(method="sample").sentences_per_batch == 1024
    assert DecodeOptions(method="beam").sentences_per_batch == 256  # 4 hypotheses each
    assert DecodeOptions(method="beam", batch_size=8).sentences_per_batch == 8


def test_beam_n_best_and_scores(bundle, sentences):
    options = DecodeOptions(beam_size=4, n_best=4, alpha=0.6)
    for result in translate_detailed(bundle, sentences[:3], options):
        assert len(result.n_best) == 4
        scores = [s for _, s in result.n_best]
        assert scores == sorted(scores, reverse=True)
        assert result.n_best[0] == (result.text, result.score)
        assert len(result.token_logprobs) == len(result.ids) + 1  # eos last
        gnmt = ((5 + len(result.token_logprobs)) / 6) ** 0.6
        assert result.score == pytest.approx(sum(result.token_logprobs) / gnmt, abs=1e-4)
        assert result.tokens == bundle.tokenizer.tokens(result.ids)
        assert result.source_tokens[-1] == "<eos>"


def test_confidence_is_the_geometric_mean_token_probability(bundle, sentences):
    for result in translate_detailed(bundle, sentences[:3], DecodeOptions(method="greedy")):
        probabilities = [math.exp(lp) for lp in result.token_logprobs]
        assert result.confidence == pytest.approx(math.prod(probabilities) ** (1 / len(probabilities)))
        assert 0 < result.confidence <= 1
    empty = translate_detailed(bundle, ["   "], DecodeOptions())[0]
    assert math.isnan(empty.confidence)


def test_beam_wider_than_half_the_vocabulary(bundle):
    vocab = bundle.tokenizer.vocab_size  # 16: fewer than 2·beam candidates exist at the first step
    [result] = translate_detailed(bundle, ["a b c"], beam_size=vocab - 4, n_best=3)
    assert result.text == "c b a" and len(result.n_best) == 3
    with pytest.raises(ValueError, match="beam_size must be smaller than the vocabulary"):
        translate(bundle, ["a b c"], beam_size=vocab)
    with pytest.raises(ValueError, match="beam_size must be smaller than the vocabulary"):
        BeamStepper(bundle, "a b c", beam_size=vocab)  # before, it built and failed at its first step


def test_length_penalties():
    assert length_penalty(1, DecodeOptions()) == 1.0
    assert length_penalty(7, DecodeOptions(alpha=0.6)) == pytest.approx(2 ** 0.6)
    assert length_penalty(9, DecodeOptions(length_penalty="plain", alpha=0.5)) == 3.0
    assert length_penalty(9, DecodeOptions(alpha=0.0)) == 1.0


def test_plain_length_penalty_changes_scores(bundle, sentences):
    [result] = translate_detailed(bundle, sentences[:1], length_penalty="plain", alpha=1.0)
    assert result.score == pytest.approx(sum(result.token_logprobs) / len(result.token_logprobs), abs=1e-5)


def test_sampling_is_repeatable_with_a_seed(bundle, sentences):
    first = translate_detailed(bundle, sentences, method="sample", seed=11, temperature=2.0)
    again = translate_detailed(bundle, sentences, method="sample", seed=11, temperature=2.0)
    other = translate_detailed(bundle, sentences, method="sample", seed=12, temperature=2.0)
    assert [r.ids for r in first] == [r.ids for r in again]
    assert [r.ids for r in first] != [r.ids for r in other]
    for r in first:
        assert r.score == pytest.approx(sum(r.token_logprobs), abs=1e-4)


@pytest.mark.parametrize("cut", [{"top_k": 1}, {"top_p": 1e-6}])
def test_top_k_1_or_tiny_top_p_sampling_equals_greedy(bundle, sentences, cut):
    src, max_out = encode(bundle, sentences)
    sampled = sample(bundle.model, src, max_out, seed=0, temperature=3.0, **cut)
    greedy = greedy_decode(bundle.model, src, max_out)
    assert [h.ids for h in sampled] == [h.ids for h in greedy]


def test_top_k_and_top_p_filters():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    def kept(**cut):
        return torch.isfinite(filter_logits(logits, **cut))[0].tolist()
    assert kept(top_k=3, top_p=1.0) == [True, True, True, False]
    assert kept(top_k=0, top_p=0.75) == [True, True, False, False]  # 0.5 < 0.75 <= 0.5 + 0.3
    assert kept(top_k=0, top_p=0.8) == [True, True, False, False]
    assert kept(top_k=0, top_p=0.81) == [True, True, True, False]
    assert kept(top_k=1, top_p=0.01) == [True, False, False, False]
    tied = torch.tensor([[0.0, 0.0, 0.0, -1.0]])
    assert torch.isfinite(filter_logits(tied, top_k=1, top_p=1.0)).sum() == 1  # k tokens, not every tie


def test_max_output_length_is_a_times_the_source_plus_b():
    """|source| counts the source's tokens and its <eos>, as the model reads them (section 6.1: input + 50)."""
    assert max_output_length(5, DecodeOptions(max_len_a=2.0, max_len_b=3), 64) == (13, None)
    assert max_output_length(5, DecodeOptions(), 64) == (55, None)
    assert max_output_length(5, DecodeOptions(max_len_a=0.0, max_len_b=0), 64) == (1, None)  # eos at least
    limit, notice = max_output_length(20, DecodeOptions(), 64)
    assert limit == 63 and "70 clamped to 63 tokens" in notice


def test_max_and_min_length(bundle):
    [short] = translate_detailed(bundle, ["a b c d e f"], max_len_a=0.0, max_len_b=3)
    assert len(short.ids) <= 2 and len(short.token_logprobs) == len(short.ids) + 1
    [long] = translate_detailed(bundle, ["a b c"], min_len=6, method="greedy")
    assert len(long.ids) >= 6
    assert "output stopped at the maximum length (2 tokens and <eos>): it may be cut short" in short.notices
    [clamped] = translate_detailed(bundle, ["a b c"], max_len_b=500)
    assert any("clamped to 31 tokens" in n for n in clamped.notices)
    assert not any("output stopped" in n for n in clamped.notices + long.notices)  # they ended by themselves


def test_every_continuation_forbidden_gives_no_hypothesis_not_a_crash(bundle):
    # no_repeat_ngram=1 lets each token appear once; with eos forbidden until 20 tokens, the
    # 16-token vocabulary runs out first.
    for method in ("greedy", "beam", "sample"):
        [result] = translate_detailed(bundle, ["a b c"], method=method, no_repeat_ngram=1, min_len=20, seed=0)
        assert result.text == "" and result.ids == [] and "no hypothesis could be completed" in result.notices
    src, max_out = encode(bundle, ["a b c", "c d"])
    assert greedy_decode(bundle.model, src, max_out, no_repeat_ngram=1, min_len=20) == [None, None]
    with pytest.warns(UserWarning, match="no hypothesis could be completed"):
        translate(bundle, ["a b c"], method="greedy", no_repeat_ngram=1, min_len=20)


def test_a_tiny_temperature_samples_the_most_probable_token(bundle, sentences):
    src, max_out = encode(bundle, sentences)
    greedy = [h.ids for h in greedy_decode(bundle.model, src, max_out)]
    for temperature in (1e-40, 1e-46):  # 1/T overflows float32; T itself rounds to 0 in float32
        assert [h.ids for h in sample(bundle.model, src, max_out, seed=0, temperature=temperature)] == greedy


@pytest.mark.parametrize("n", [1, 2])
def test_no_repeat_ngram(bundle, n):
    text = "a a b b a a b b"
    for method in ("greedy", "beam"):
        [result] = translate_detailed(bundle, [text], method=method, no_repeat_ngram=n)
        grams = [tuple(result.ids[i:i + n]) for i in range(len(result.ids) - n + 1)]
        assert len(grams) == len(set(grams)) and result.ids


def test_repeated_ngrams_bans_only_the_token_that_completes_a_seen_ngram():
    # Row [5, 6, 5]: with n=2 the prefix "5" was followed by 6, so only 6 is banned (5 may repeat);
    # with n=1 every token seen is; with n=3, "6 5" has not been seen before, so nothing is.
    tokens = torch.tensor([[5, 6, 5], [1, 2, 3]])
    banned = lambda n: [row.nonzero().flatten().tolist() for row in _repeated_ngrams(tokens, n, 8)]  # noqa: E731
    assert banned(2) == [[6], []]
    assert banned(1) == [[5, 6], [1, 2, 3]]
    assert banned(3) == [[], []]
    assert _repeated_ngrams(tokens, 4, 8) is None  # shorter than n: nothing to match yet


@pytest.mark.parametrize("bad", [
    {"beam_size": 0}, {"top_p": 1.5}, {"top_p": 0.0}, {"alpha": -0.1}, {"method": "viterbi"},
    {"length_penalty": "wu"}, {"temperature": 0}, {"top_k": -1}, {"n_best": 5}, {"max_len_b": -1},
    {"max_len_a": float("nan")}, {"batch_size": 0}, {"min_len": 1.5}, {"beam_size": True}, {"seed": "x"},
    {"seed": 2**63}, {"max_len_b": 2**70},
])
def test_nonsense_options_raise_value_error_naming_the_option(bundle, bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        translate(bundle, ["a b"], **bad)
    with pytest.raises(ValueError, match=name):
        DecodeOptions(**bad).validate()


def test_unknown_option_and_single_string(bundle):
    with pytest.raises(ValueError, match="beams"):
        translate(bundle, ["a b"], beams=4)
    with pytest.raises(ValueError, match="n_best"):
        translate(bundle, ["a b"], method="greedy", n_best=2)
    with pytest.raises(TypeError, match="not a single str"):
        translate(bundle, "a b")


def test_misplaced_arguments_are_named(bundle):
    for sentences, kind in ((None, "NoneType"), (5, "int")):
        with pytest.raises(TypeError, match=f"sentences must be a list of str, got {kind}"):
            translate(bundle, sentences)
    with pytest.raises(TypeError, match="bundle must be a ModelBundle"):
        translate(["a b"], bundle)  # swapped
    with pytest.raises(TypeError, match="options must be a DecodeOptions, got str"):
        translate_detailed(bundle, ["a b"], "greedy")
    with pytest.raises(TypeError, match="on_batch must be a function"):
        translate_detailed(bundle, ["a b"], on_batch=5)


def test_numpy_integers_are_whole_numbers(bundle):
    np = pytest.importorskip("numpy")
    assert translate(bundle, ["a b c"], beam_size=np.int64(2)) == translate(bundle, ["a b c"], beam_size=2)


def test_bad_sentences_and_bundles_are_named(bundle):
    with pytest.raises(TypeError, match=r"sentences\[1\]: a source sentence must be a str, got int"):
        translate(bundle, ["a b", 3])
    # what bytes that are not UTF-8 become when read with errors="surrogateescape"
    undecodable = b"a \xfc b".decode("utf-8", "surrogateescape")
    with pytest.raises(ValueError, match="sentences\\[0\\]: character 3 is U\\+DCFC, not text"):
        translate(bundle, [undecodable])
    with pytest.raises(TypeError, match=r"bundle must be a ModelBundle \(core.load_checkpoint"):
        translate("checkpoints/multi30k-de-en-small", ["a b"])


def test_the_convenience_api_is_importable_from_core(bundle):
    import core

    assert core.translate(bundle, ["a b c"]) == ["c b a"]
    assert callable(core.load_checkpoint) and callable(core.evaluate_bundle)


def test_empty_input_gives_empty_translation_with_notice(bundle):
    results = translate_detailed(bundle, ["", "   \n", "a b"])
    for r in results[:2]:
        assert isinstance(r, Translation) and r.text == "" and r.ids == [] and r.notices == ["empty input"]
    assert results[2].text == "b a"
    assert translate(bundle, []) == []


def test_long_source_is_truncated_with_notice_and_warning(bundle):
    text = " ".join("abcdefghijkl"[i % 12] for i in range(40))
    [result] = translate_detailed(bundle, [text])
    assert "source truncated from 40 to 31 tokens" in result.notices[0]
    assert len(result.source_tokens) == 32 and result.source_tokens[-1] == "<eos>"  # cut before its end mark
    with pytest.warns(UserWarning, match="source truncated"):
        translate(bundle, [text])


def test_unknown_characters_are_mapped_to_unk_and_reported(bundle):
    [result] = translate_detailed(bundle, ["a ü b 🙂 ü"], method="greedy")
    assert result.notices[0] == "3 unknown pieces mapped to <unk>: 'ü', '🙂'"
    assert result.source_tokens.count("<unk>") == 3
    with pytest.warns(UserWarning, match="3 unknown pieces mapped to <unk>"):
        translate(bundle, ["a ü b 🙂 ü"])
    with pytest.warns(UserWarning, match="3 unknown pieces mapped to <unk>"):  # a generator's too (read once)
        assert len(translate(bundle, (s for s in ["a b", "a ü b 🙂 ü"]))) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty sentence gives "" without a warning
        assert translate(bundle, ["", "  "]) == ["", ""]


def test_model_mode_is_restored_and_any_bundle_like_object_works(bundle):
    model = bundle.model
    model.train()
    try:
        out = translate(SimpleNamespace(model=model, tokenizer=bundle.tokenizer), ["a b c"] * 3)
        assert model.training
    finally:
        model.eval()
    assert out == ["c b a"] * 3


# ----- bench/decode.py on the tiny model ---------------------------------------------------
def load_bench():
    spec = importlib.util.spec_from_file_location("bench_decode", ROOT / "bench" / "decode.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_naive_and_batched_agree(bundle, sentences):
    lines = []
    figures = load_bench().run_benchmark(bundle, sentences[:6], naive_limit=3, out=lines.append)
    assert set(figures) == {"beam", "greedy"}
    assert all(f["identical"] and f["speedup"] > 0 and f["gflop"] > 0 for f in figures.values())
    assert "identical outputs on those 3: yes" in lines[0] and lines[2].strip().startswith("greedy")
    # The arithmetic ceiling: beam search does more matrix work than greedy decoding.
    assert "ceiling" in lines[1] and figures["beam"]["gflop"] > figures["greedy"]["gflop"]


def test_bench_naive_sample_spans_the_source_lengths(bundle):
    sentences = ["a " * n for n in (9, 1, 5, 3, 7, 2, 8, 4, 6, 10)]  # 1-10 words, shuffled
    picks = load_bench().spread_sample(bundle, sentences, 5)
    assert picks == sorted(picks) and len(set(picks)) == 5
    # The middle of each fifth of the lengths: the 2nd, 4th, ... shortest sentence.
    assert sorted(sentences[i].count("a") for i in picks) == [2, 4, 6, 8, 10]
    assert load_bench().spread_sample(bundle, sentences[:3], 5) == [0, 1, 2]


def test_bench_main_on_a_saved_checkpoint(bundle, sentences, tmp_path, capsys):
    from core.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / "tiny", bundle)
    with gzip.open(tmp_path / "test_2016_flickr.de.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    bench = load_bench()
    assert bench.main(["--checkpoint", str(tmp_path / "tiny"), "--data-dir", str(tmp_path),
                       "--limit", "5", "--naive-limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 sentences only" in out and out.count("identical outputs on those 2: yes") == 2
    with pytest.raises(SystemExit, match="Multi30k test set not found"):
        bench.main(["--data-dir", str(tmp_path / "absent")])
