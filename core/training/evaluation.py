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

import torch
from sacrebleu.metrics import BLEU, CHRF
from tqdm.auto import tqdm

from ..data.batching import TokenBatcher, encode_pairs
from ..data.tokenizer import BOS_ID, EOS_ID
from ..inference.options import DecodeOptions
from ..inference.steps import inference
from ..inference.translation import (
    Translation,
    check_bundle,
    prepare_source,
    str_list,
    target_tokenizer,
    text_list,
    translate_detailed,
)
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


def evaluate_bleu_references(hypotheses: list[str], references: list[list[str]]) -> EvalResult:
    """Corpus BLEU and chrF of detokenized hypotheses against every reference given for each (Tatoeba lists
    several translations of one sentence): sacreBLEU counts an n-gram found in any of them."""
    hypotheses, references = str_list(hypotheses, "hypotheses"), text_list(references, "references")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} lists of references; they must pair up")
    for i, refs in enumerate(references):
        if isinstance(refs, str) or not refs or not all(isinstance(r, str) for r in refs):
            raise TypeError(f"references[{i}] must be a non-empty list of str, got {refs!r:.60}")
    if not hypotheses:
        raise ValueError("nothing to score: hypotheses and references are empty")
    most = max(map(len, references))
    streams = [[refs[k] if k < len(refs) else None for refs in references] for k in range(most)]  # None: no k-th
    bleu, chrf = BLEU(), CHRF()
    bleu_score, chrf_score = bleu.corpus_score(hypotheses, streams), chrf.corpus_score(hypotheses, streams)
    return EvalResult(bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature()),
                      len(hypotheses))


def grouped_references(sources: list[str], references: list[str]) -> tuple[list[str], list[list[str]]]:
    """Each distinct source once, in first-seen order, with every reference given for it."""
    by_source: dict[str, list[str]] = {}
    for source, reference in zip(sources, references):
        by_source.setdefault(source, []).append(reference)
    return list(by_source), list(by_source.values())


def evaluate_bundle(bundle: Any, sources: list[str], references: list[str], options: DecodeOptions | None = None,
                    progress: bool = True, all_references: bool = False,
                    **overrides: Any) -> tuple[EvalResult, list[Translation]]:
    """Translate sources with bundle (a ModelBundle or anything with .model and .tokenizer),
    then score against references. Returns the scores and the translations, in input order:
    each holds its hypothesis (.text) and what was done to its source (.notices: truncation, <unk>).
    all_references: a source given more than once is translated once, against all its references
    (grouped_references; the translations are then the distinct sources')."""
    sources, references = str_list(sources, "sources"), str_list(references, "references")
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references; they must pair up one to one")
    if all_references:
        sources, grouped = grouped_references(sources, references)
    with tqdm(total=len(sources), desc="translating", unit="sent", disable=not progress) as bar:
        results = translate_detailed(bundle, sources, options, on_batch=bar.update, **overrides)
    hypotheses = [r.text for r in results]
    scores = evaluate_bleu_references(hypotheses, grouped) if all_references else evaluate_bleu(hypotheses, references)
    return scores, results


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


@torch.no_grad()
def teacher_forced_argmax(bundle: Any, sources: list[str], references: list[str]) -> list[str]:
    """Seed 004's preview during training, as text: at each position of the reference, the token the model finds
    most likely given the source and the reference before it (teacher forcing: no decoding, so it is cheap and it
    shows what the model has learnt before it can write a sentence of its own), up to its first <eos>."""
    check_bundle(bundle)
    model, target = bundle.model, target_tokenizer(bundle)
    device, max_len = next(model.parameters()).device, model.config.max_len
    previews = []
    with inference(model):
        for source, reference in zip(str_list(sources, "sources"), str_list(references, "references")):
            src = prepare_source(bundle.tokenizer, source, max_len).ids
            tgt_in = [BOS_ID] + target.encode(reference)[: max_len - 1]
            if not src:
                previews.append("")
                continue
            logits = model(torch.tensor([src], device=device), torch.tensor([tgt_in], device=device))
            ids = logits[0].argmax(-1).tolist()
            previews.append(target.decode(ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids))
    return previews
