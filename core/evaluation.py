"""Corpus BLEU (the paper's metric, section 6.1 and Table 2) and chrF, computed with
sacreBLEU on detokenized text so the figures are comparable and come with their signatures.

The paper's BLEU on WMT14 was not sacreBLEU (it scored tokenized text); figures from here are
sacreBLEU's default 13a-tokenized, case-sensitive corpus BLEU, and say so in the signature.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF
from tqdm.auto import tqdm

from .decoding import DecodeOptions
from .translation import Translation, text_list, translate_detailed


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


def str_list(texts: Any, what: str) -> list[str]:
    """texts as a list, each a str; else a TypeError naming `what` and the first item that is not."""
    texts = text_list(texts, what)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{i}] must be a str, got {type(text).__name__} {str(text)[:40]!r}")
    return texts


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
