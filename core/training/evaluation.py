"""Corpus BLEU (the paper's metric, section 6.1 and Table 2) and chrF, computed with
sacreBLEU on detokenized text so the figures are comparable and come with their signatures;
and, without decoding, the references' perplexity and token accuracy under teacher forcing
(Table 3 reports perplexity beside BLEU).

The paper's BLEU on WMT14 was not sacreBLEU (it scored tokenized text); figures from here are
sacreBLEU's default 13a-tokenized, case-sensitive corpus BLEU, and say so in the signature.
Table 3's perplexities are per wordpiece of the paper's vocabulary; ours are per token of the
model's own vocabulary, so they compare between models of one vocabulary only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF
from tqdm.auto import tqdm

from ..data.batching import TokenBatcher, encode_pairs
from ..inference.decoding import DecodeOptions, inference
from ..inference.translation import Translation, check_bundle, str_list, target_tokenizer, translate_detailed
from .loss import Objective


@dataclass(frozen=True)
class EvalResult:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    n: int  # sentence pairs scored

    def __str__(self) -> str:
        return (f"BLEU {self.bleu:.2f} ({self.bleu_signature}); chrF {self.chrf:.2f} ({self.chrf_signature}); "
                f"{self.n} sentences")


def evaluate_bleu(hypotheses: list[str], references: list[str]) -> EvalResult:
    """Corpus BLEU and chrF of detokenized hypotheses against one reference each."""
    hypotheses, references = str_list(hypotheses, "hypotheses"), str_list(references, "references")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references; "
                         "they must pair up one to one")
    if not hypotheses:
        raise ValueError("nothing to score: hypotheses and references are empty")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return EvalResult(bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature()),
                      len(hypotheses))


def evaluate_bundle(bundle: Any, sources: list[str], references: list[str], options: DecodeOptions | None = None,
                    progress: bool = True, **overrides: Any) -> tuple[EvalResult, list[Translation]]:
    """Translate sources with bundle (a ModelBundle or anything with .model and .tokenizer),
    then score against references. Returns the scores and the translations, in input order:
    each holds its hypothesis (.text) and what was done to its source (.notices: truncation, <unk>)."""
    sources, references = str_list(sources, "sources"), str_list(references, "references")
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references; they must pair up one to one")
    with tqdm(total=len(sources), desc="translating", unit="sent", disable=not progress) as bar:
        results = translate_detailed(bundle, sources, options, on_batch=bar.update, **overrides)
    return evaluate_bleu([r.text for r in results], references), results


@dataclass(frozen=True)
class TeacherForcedResult:
    accuracy: float  # the model's most likely next token is the reference's, over reference tokens (eos included)
    perplexity: float  # exp of the mean negative log-likelihood per reference token
    tokens: int  # reference tokens scored
    pairs: int  # sentence pairs scored
    too_long: int  # pairs left out: a side longer than the model's max_len

    def __str__(self) -> str:
        return (f"token accuracy {self.accuracy:.2%}; perplexity {self.perplexity:.2f} (teacher forced, "
                f"{self.tokens} reference tokens of {self.pairs} sentences)")


def teacher_forced_metrics(bundle: Any, sources: list[str], references: list[str],
                           max_tokens: int = 4096) -> TeacherForcedResult:
    """How well the model predicts each reference token given the source and the reference before it
    (teacher forcing, as in training; no decoding): token accuracy, and perplexity, the exponent of the
    unsmoothed cross-entropy. Batches hold at most max_tokens padded tokens (section 5.1's batching)."""
    check_bundle(bundle)
    sources, references = str_list(sources, "sources"), str_list(references, "references")
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references; they must pair up one to one")
    model = bundle.model
    target = target_tokenizer(bundle)
    examples, too_long = encode_pairs(list(zip(sources, references)), bundle.tokenizer, model.config.max_len,
                                      None if target is bundle.tokenizer else target)
    if not examples:
        raise ValueError(f"nothing to score: {'every pair is longer than the model reads' if too_long else 'no pairs'}")
    device = next(model.parameters()).device
    objective = Objective(model, label_smoothing=0.0)
    nll = correct = 0.0
    with inference(model):
        for batch in TokenBatcher(examples, max_tokens, shuffle=False):
            batch = batch.to(device)
            _, batch_nll, hits = objective(batch.src, batch.tgt_in, batch.tgt_out)
            nll, correct = nll + batch_nll.item(), correct + hits.item()
    tokens = sum(len(e.tgt) - 1 for e in examples)  # each target token after <bos>, <eos> included
    return TeacherForcedResult(correct / tokens, math.exp(min(nll / tokens, 50.0)), tokens, len(examples), too_long)
