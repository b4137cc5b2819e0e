"""core.training.evaluation: sacreBLEU corpus BLEU and chrF with signatures; evaluate_bundle."""
from __future__ import annotations

import random

import pytest
import sacrebleu

from core.data.tokenizer import Tokenizer
from core.inference.options import DecodeOptions
from core.inference.translation import Translation, translate
from core.training import evaluation
from core.training.evaluation import EvalResult, evaluate_bleu, evaluate_bundle
from tests.helpers.models import reverse_task, tiny_bundle

HYPS = ["The cat sat on the mat.", "A man rides a red bike down the street."]
REFS = ["The cat sat on the mat.", "A man is riding a red bicycle down the road."]


def test_bleu_and_chrf_match_sacrebleu():
    result = evaluate_bleu(HYPS, REFS)
    assert isinstance(result, EvalResult) and result.n == 2
    assert result.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert result.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert "tok:13a" in result.bleu_signature and "nrefs:1" in result.bleu_signature
    assert "nc:6" in result.chrf_signature
    assert "BLEU" in str(result) and result.bleu_signature in str(result)


def test_perfect_and_empty_output():
    assert evaluate_bleu(REFS, REFS).bleu == pytest.approx(100.0)
    assert evaluate_bleu(["", ""], REFS).bleu == 0.0


def test_mismatched_or_missing_input_raises():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        evaluate_bleu(HYPS, REFS[:1])
    with pytest.raises(ValueError, match="empty"):
        evaluate_bleu([], [])
    with pytest.raises(TypeError):
        evaluate_bleu("a b", "a b")
    with pytest.raises(ValueError, match="sources"):
        evaluate_bundle(None, ["a"], [], progress=False)
    with pytest.raises(TypeError, match="sources must be a list of str, not a single str"):
        evaluate_bundle(None, "text", ["ref"], progress=False)
    # sacreBLEU's own shape for references, and stray items: named, not sacreBLEU's "Undefined line"
    with pytest.raises(TypeError, match=r"references\[0\] must be a str, got list"):
        evaluate_bleu(["a"], [["a"]])
    with pytest.raises(TypeError, match=r"hypotheses\[1\] must be a str, got NoneType"):
        evaluate_bleu(["a", None], ["a", "b"])


def test_generators_are_scored_like_lists():
    assert evaluate_bleu(iter(HYPS), (r for r in REFS)) == evaluate_bleu(HYPS, REFS)


def test_evaluate_bundle_translates_then_scores(capsys):
    rng = random.Random(5)
    pairs = [reverse_task(rng) for _ in range(12)]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    bundle = tiny_bundle()
    options = DecodeOptions(method="greedy", batch_size=5)
    result, translations = evaluate_bundle(bundle, sources, references, options)
    hypotheses = [t.text for t in translations]
    assert hypotheses == translate(bundle, sources, method="greedy")
    assert result == evaluate_bleu(hypotheses, references)
    assert result.bleu > 50
    assert "12/12" in capsys.readouterr().err  # the progress bar reached the end
    evaluate_bundle(bundle, sources[:2], references[:2], options, progress=False)
    assert capsys.readouterr().err == ""


def test_evaluate_bundle_scores_detokenized_text(monkeypatch):
    # A BPE model's tokens are pieces of words ("▁c", "at"); BLEU must read the text they decode to.
    # The translations are given (a model's would depend on its training): scored against their own
    # text they get 100; their tokens joined by spaces would get 0.
    texts = ["the cat sat on the mat", "a man rides a bike down the street", "dogs run in the deep snow"]
    tokenizer = Tokenizer.train(texts * 5, vocab_size=40, kind="bpe", min_frequency=1)

    def translated(bundle, sources, options=None, **kwargs):
        return [Translation(text, ids, tokenizer.tokens(ids), [0.0] * (len(ids) + 1), 0.0, [(text, 0.0)], [])
                for text, ids in ((t, tokenizer.encode(t)) for t in sources)]

    monkeypatch.setattr(evaluation, "translate_detailed", translated)
    result, translations = evaluate_bundle(None, texts, texts, progress=False)
    assert all(t.text != " ".join(t.tokens) for t in translations)
    assert result.bleu == pytest.approx(100.0) and result.chrf == pytest.approx(100.0)


def test_teacher_forced_metrics_are_the_references_accuracy_and_perplexity():
    """Seed 004's metrics, without decoding: computed here by hand from the model's logits."""
    import math

    import torch

    from core.data.batching import BOS_ID, EOS_ID, pad_ids
    from core.training.evaluation import TeacherForcedResult, teacher_forced_metrics

    bundle, rng = tiny_bundle(), random.Random(7)
    pairs = [reverse_task(rng) for _ in range(12)]
    pairs[3] = (pairs[3][0], "a b c d")  # a wrong reference: accuracy below 1
    result = teacher_forced_metrics(bundle, [s for s, _ in pairs], [t for _, t in pairs], max_tokens=40)
    nll = hits = tokens = 0.0
    with torch.no_grad():
        for source, reference in pairs:
            src = pad_ids([bundle.tokenizer.encode(source) + [EOS_ID]])
            tgt = [BOS_ID] + bundle.tokenizer.encode(reference) + [EOS_ID]
            log_probs = bundle.model(src, torch.tensor([tgt[:-1]])).log_softmax(-1)[0]
            gold = torch.tensor(tgt[1:])
            nll -= log_probs.gather(1, gold[:, None]).sum().item()
            hits += (log_probs.argmax(-1) == gold).sum().item()
            tokens += len(gold)
    assert isinstance(result, TeacherForcedResult) and (result.pairs, result.tokens, result.too_long) == (12, tokens, 0)
    assert result.accuracy == pytest.approx(hits / tokens) and 0.5 < result.accuracy < 1
    assert result.perplexity == pytest.approx(math.exp(nll / tokens), rel=1e-4)
    assert "token accuracy" in str(result)


def test_teacher_forced_metrics_leave_out_pairs_too_long_and_refuse_mismatches():
    from core.training.evaluation import teacher_forced_metrics

    bundle = tiny_bundle()
    long = " ".join(["a"] * 40)  # max_len is 32
    result = teacher_forced_metrics(bundle, ["a b c", long], ["c b a", long])
    assert (result.pairs, result.too_long) == (1, 1)
    with pytest.raises(ValueError, match="2 sources but 1 references"):
        teacher_forced_metrics(bundle, ["a", "b"], ["a"])
    with pytest.raises(ValueError, match="nothing to score: every pair is longer than the model reads"):
        teacher_forced_metrics(bundle, [long], [long])
