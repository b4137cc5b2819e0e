"""The numbers behind the Compare tab and its /compare endpoint: one sentence through two models (each
with its own tokenizers: the two may differ in vocabulary, task and size), the word-level difference of
their translations, each model's score on the first sentences of a corpus split, and our Table 3's
results (docs/table3.csv, written by bench/table3.py). No Gradio here.

Every refusal is an ``explanations.Refused`` whose text names what was wrong. The work runs in a decoding slot
(``slots.heavy``); a corpus score first keeps the sentences the request's budget affords (``limits.Budget``) and
stops between batches once its client has gone or its deadline has passed.
"""
from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from core.bundle import ModelBundle
from core.data.files import load_corpus
from core.data.tasks import TASKS, task_of
from core.explain.hooks import attention_maps
from core.inference.options import DecodeOptions
from core.inference.scoring import prepare_pair
from core.inference.translation import Translation, translate_detailed
from core.training.evaluation import TeacherForcedResult, evaluate_bleu, teacher_forced_metrics

from ..server import slots
from ..server.limits import affordable_sentences, budget_words, sentence_seconds
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..train.sources import DATA_ROOTS, ROOT
from .explanations import Refused, finite, floats, source_text

DECODINGS = {"greedy": DecodeOptions(method="greedy"), "beam 4": DecodeOptions(method="beam", beam_size=4)}
DEFAULT_SENTENCES, MAX_SENTENCES = 100, 500  # a corpus score: 500 beam-4 sentences take ~8 s a model on 2 cores
PROGRESS_BATCH = 20
FORCED_CHUNK = 100  # pairs teacher forced between two looks at whether to stop (~0.3 s)
SPLITS = ("valid", "test", "train")
TABLE3_CSV = ROOT / "docs" / "table3.csv"


# ----- the corpora offered: those on this machine, and the synthetic tasks ---------------------
def _corpora() -> dict[str, str]:
    """label -> core.data.files spec: Multi30k and Tatoeba where the shared data holds them, every synthetic task."""
    found = {}
    for root in DATA_ROOTS:
        if (root / "multi30k").is_dir():
            found.setdefault("Multi30k (de–en)", f"files:{root / 'multi30k'}")
        if (root / "tatoeba-deu-eng" / "deu-eng.tsv.gz").is_file():  # English<TAB>German
            found.setdefault("Tatoeba (de–en)", f"files:{root / 'tatoeba-deu-eng' / 'deu-eng.tsv.gz'}:en-de")
    return found | {f"synthetic: {name}": f"synthetic:{name}" for name in TASKS}


CORPORA = _corpora()


def corpus_for(bundle: ModelBundle) -> str:
    """The offered corpus a model most likely learnt from (its synthetic task, or Multi30k): the default."""
    task = task_of(bundle.info)
    if task is not None:
        return f"synthetic: {task}"
    data = bundle.info.get("data")
    source = str(data.get("source", "")) if isinstance(data, dict) else ""
    return next((label for label in CORPORA if label.split()[0].lower() in source.lower()), next(iter(CORPORA)))


@functools.lru_cache(maxsize=4)  # Tatoeba takes seconds to read and carve: a second score reuses it
def _corpus(spec: str, src_lang: str | None, tgt_lang: str | None):
    return load_corpus(spec, src_lang, tgt_lang)


def corpus_pairs(label: str, split: str, n: object, bundle: ModelBundle
                 ) -> tuple[list[tuple[str, str]], str, tuple[str, str]]:
    """The first n pairs of a split, in the direction of bundle (model A) where the corpus has its languages,
    else the corpus's own; the pairs in words ("the first 100 pairs of Multi30k (de–en), valid split,
    de → en"); and their (source, target) languages."""
    if label not in CORPORA:
        raise Refused(f"unknown corpus {str(label)[:60]!r}; choose one of: {', '.join(CORPORA)}")
    if split not in SPLITS:
        raise Refused(f"unknown split {str(split)[:20]!r}; choose one of: {', '.join(SPLITS)}")
    n = _count(n)
    langs = (bundle.info.get("src_lang"), bundle.info.get("tgt_lang"))
    try:
        corpus = _corpus(CORPORA[label], *langs) if all(isinstance(x, str) for x in langs) else None
    except ValueError:  # the corpus has other languages: read it its own way round
        corpus = None
    try:
        corpus = corpus or _corpus(CORPORA[label], None, None)
    except (ValueError, OSError) as exc:
        raise Refused(f"cannot read {label}: {exc}") from None
    pairs = getattr(corpus, split)[:n]
    if not pairs:
        raise Refused(f"{label} has no {split} split to score")
    langs = (corpus.src_lang, corpus.tgt_lang)
    return pairs, f"the first {len(pairs)} pairs of {label}, {split} split, {langs[0]} → {langs[1]}", langs


def other_direction(bundle: ModelBundle, langs: tuple[str, str]) -> str | None:
    """The model's direction in words when its checkpoint names one other than the pairs' (else None): its
    scores then say only that it does not translate these pairs."""
    own = (bundle.info.get("src_lang"), bundle.info.get("tgt_lang"))
    return f"{own[0]} → {own[1]}" if all(isinstance(x, str) for x in own) and own != langs else None


def _count(n: object) -> int:
    """The number of sentences asked for, a whole number from 1 to MAX_SENTENCES."""
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n < 1:
        raise Refused(f"the number of sentences must be from 1 to {MAX_SENTENCES}; got {str(n)[:20]!r}")
    return min(int(n), MAX_SENTENCES)


# ----- one sentence through a model ------------------------------------------------------------
@dataclass
class Side:
    """One model's view of the sentence: its translation and its cross-attention over the source."""

    name: str
    bundle: ModelBundle
    translation: Translation
    cross: np.ndarray  # (layers, heads, target tokens with <eos>, source tokens with <eos>), teacher forced
    target_tokens: list[str]  # the rows of cross: the translation's tokens, "<eos>" last
    notices: list[str] = field(default_factory=list)

    @property
    def probabilities(self) -> list[float]:
        """Each output token's probability when it was chosen, <eos> last."""
        return np.exp(self.translation.token_logprobs).tolist()


def model(registry: ModelRegistry, name: str | None, which: str) -> ModelBundle:
    """The bundle picked as model `which` ("A" or "B"); Refused says why it cannot be used."""
    if not name:
        raise Refused(f"pick model {which}")
    try:
        return registry.get(name)
    except UNAVAILABLE as exc:
        raise Refused(f"model {which} ({name}) cannot be used: {exc}") from None


def translate_one(name: str, bundle: ModelBundle, source: str, decoding: str) -> Side:
    """Translate source with bundle, then read the cross-attention of that very translation (teacher forced)."""
    options = DECODINGS.get(decoding)
    if options is None:
        raise Refused(f"unknown decoding {str(decoding)[:20]!r}; choose one of: {', '.join(DECODINGS)}")
    try:
        t = translate_detailed(bundle, [source], options)[0]
        pair = prepare_pair(bundle, source, t.ids)
    except ValueError as exc:  # an option this model cannot take (a beam wider than a tiny vocabulary)
        raise Refused(f"{name}: {exc}") from None
    if pair.empty:
        raise Refused(f"{name} reads no tokens in this sentence")
    cross = attention_maps(bundle.model, pair.src, pair.tgt_in)["cross"].double().numpy()
    return Side(name, bundle, t, cross, pair.tokens, list(dict.fromkeys(t.notices + pair.notices)))


def translate_both(registry: ModelRegistry, names: tuple[str | None, str | None], text: object, decoding: str
                   ) -> tuple[Side, Side, list[str]]:
    """The sentence through model A and model B (the same model twice is allowed): both Sides and what
    cleaning the text did."""
    source, notices = source_text(text)
    bundles = [model(registry, name, which) for name, which in zip(names, "AB")]
    with slots.heavy():
        a, b = (translate_one(str(name), bundle, source, decoding) for name, bundle in zip(names, bundles))
    return a, b, notices


def attention_view(side: Side, layer: int | None, head: int | None) -> tuple[np.ndarray, str]:
    """One (target, source) map of a side: a decoder layer (None: the last; past its layers: its last) and a
    head (None: their mean; past its heads: their mean), and what it is, in words."""
    layers, heads = side.cross.shape[:2]
    index = layers - 1 if layer is None else min(layer, layers - 1)
    where = f"layer {index + 1} of {layers}"
    if head is None or head >= heads:
        return side.cross[index].mean(axis=0), f"{where}, mean of its {heads} heads"
    return side.cross[index, head], f"{where}, head {head + 1} of {heads}"


# ----- a corpus score --------------------------------------------------------------------------
def affordable_pairs(bundles: list[ModelBundle], pairs: list[tuple[str, str]], *, beam: int = 1, passes: int = 1,
                     measured: str = "scored", how: str = "") -> tuple[list[tuple[str, str]], float, list[str]]:
    """The first of pairs that the request's budget affords through every model, each pair passes times (a knock-out
    translates it twice), each sentence's cost estimated from its tokens; their estimated CPU-seconds, and a notice
    when that is fewer than asked ("{measured} on the first n ...", how: what the cost counts, in words); Refused
    when not even one fits."""
    seconds = [passes * sum(sentence_seconds(b.model.config, *pair_tokens(b, source, reference), beam)
                            for b in bundles) for source, reference in pairs]
    budget = slots.current_budget()
    n = affordable_sentences(budget, seconds)
    if n == 0:
        raise Refused(f"one sentence would take ~{seconds[0]:.0f} CPU-seconds; {budget_words(budget)}")
    counted = f" ({how})" if how else ""
    notices = [] if n == len(pairs) else [
        f"{measured} on the first {n} of the {len(pairs)} sentences asked: all of them would take ~{sum(seconds):.0f} "
        f"CPU-seconds{counted}, and {budget_words(budget)}"]
    return pairs[:n], sum(seconds[:n]), notices


def first_pairs(described: str, asked: int, kept: int) -> str:
    """corpus_pairs' words for the pairs, saying how many were kept of those asked."""
    return described.replace(f"the first {asked} pairs", f"the first {kept} pairs")


def pair_tokens(bundle: ModelBundle, source: str, reference: str) -> tuple[int, int]:
    """A pair's source and reference tokens as the model reads them (at most its max_len, <eos> included)."""
    longest = bundle.model.config.max_len
    return (min(len(bundle.tokenizer.encode(source)) + 1, longest),
            min(len(bundle.target_tokenizer.encode(reference)) + 1, longest))


def corpus_scores(bundles: list[ModelBundle], pairs: list[tuple[str, str]], decoding: str,
                  on_batch: Callable[[int], None] | None = None) -> tuple[list[dict[str, Any]], int, list[str]]:
    """corpus_score of each model on the pairs its budget affords, in one decoding slot: the scores, how many
    pairs were scored, and the notices (fewer pairs than asked, and why)."""
    beam = DECODINGS[decoding].beam_size if DECODINGS[decoding].method == "beam" else 1
    pairs, seconds, notices = affordable_pairs(bundles, pairs, beam=beam,
                                               how=f"{decoding} decoding, {len(bundles)} models")
    with slots.heavy(seconds) as work:
        def progress(n: int) -> None:
            work.check()
            if on_batch is not None:
                on_batch(n)
        return [corpus_score(bundle, pairs, decoding, progress) for bundle in bundles], len(pairs), notices


def corpus_score(bundle: ModelBundle, pairs: list[tuple[str, str]], decoding: str,
                 on_batch: Callable[[int], None] | None = None) -> dict[str, Any]:
    """BLEU and chrF (sacreBLEU, detokenized) of the model's translations, and token accuracy and perplexity of
    the references (teacher forced; per token of the model's own target vocabulary), on pairs. on_batch(n) after
    each batch of n sentences translated; raising from it stops the score."""
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    try:
        # Batches of PROGRESS_BATCH sentences: a progress bar that moves (greedy decodes 1,024 at once).
        options = replace(DECODINGS[decoding], batch_size=PROGRESS_BATCH)
        translations = translate_detailed(bundle, sources, options, on_batch=on_batch)
        result = evaluate_bleu([t.text for t in translations], references)
        forced = teacher_forced_in_chunks(bundle, sources, references, on_batch)
    except ValueError as exc:  # every pair longer than the model reads, a beam wider than its vocabulary
        raise Refused(str(exc)) from None
    return {"bleu": result.bleu, "chrf": result.chrf, "accuracy": 100 * forced.accuracy,
            "perplexity": forced.perplexity, "sentences": result.n, "reference_tokens": forced.tokens,
            "left_out": forced.too_long, "bleu_signature": result.bleu_signature}


def teacher_forced_in_chunks(bundle: ModelBundle, sources: list[str], references: list[str],
                             between: Callable[[int], None] | None = None) -> TeacherForcedResult:
    """core's teacher_forced_metrics over FORCED_CHUNK pairs at a time, combined (accuracy and log-perplexity
    weighted by each chunk's tokens): between(0) is called between chunks, and raising from it stops."""
    parts: list[TeacherForcedResult] = []
    too_long = 0
    for start in range(0, len(sources), FORCED_CHUNK):
        if start and between is not None:
            between(0)
        try:
            parts.append(teacher_forced_metrics(bundle, sources[start:start + FORCED_CHUNK],
                                                references[start:start + FORCED_CHUNK]))
        except ValueError:  # every pair of this chunk is longer than the model reads
            too_long += len(sources[start:start + FORCED_CHUNK])
    if not parts:
        return teacher_forced_metrics(bundle, sources, references)  # says why nothing can be scored
    tokens = sum(p.tokens for p in parts)
    accuracy = sum(p.accuracy * p.tokens for p in parts) / tokens
    perplexity = math.exp(sum(math.log(p.perplexity) * p.tokens for p in parts) / tokens)
    return TeacherForcedResult(accuracy, perplexity, tokens, sum(p.pairs for p in parts),
                               too_long + sum(p.too_long for p in parts))


def better(a: dict[str, Any], b: dict[str, Any], metric: str) -> str | None:
    """"A" or "B", whichever scores better on metric; None on a tie (or a missing figure)."""
    x, y = a.get(metric), b.get(metric)
    if x is None or y is None or round(x, 2) == round(y, 2):
        return None
    return "A" if (x < y if metric == "perplexity" else x > y) else "B"


def same_target_vocabulary(a: ModelBundle, b: ModelBundle) -> bool:
    """Whether perplexities compare: per token of the same target vocabulary."""
    return a.target_tokenizer.to_json() == b.target_tokenizer.to_json()


# ----- JSON (/compare) -------------------------------------------------------------------------
def side_json(side: Side) -> dict[str, Any]:
    t = side.translation
    return {"model": side.name, "translation": t.text, "tokens": side.target_tokens,
            "probabilities": floats(side.probabilities), "logprobs": floats(t.token_logprobs),
            "confidence": finite(t.confidence), "source_tokens": t.source_tokens, "notices": side.notices}


def scores_json(scores: dict[str, Any]) -> dict[str, Any]:
    return {k: finite(v) if isinstance(v, float) else v for k, v in scores.items()}


# ----- our Table 3 ----------------------------------------------------------------------------
def table3_rows(path: Path = TABLE3_CSV) -> list[dict[str, Any]]:
    """bench/table3.py's results, one dict per scored run (numbers as floats, None where empty); [] when the
    file does not exist yet. Refused when it cannot be read."""
    if not path.is_file():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise Refused(f"cannot read {path.name}: {exc}") from None
    numeric = ("dev_perplexity", "dev_bleu", "dev_accuracy", "paper_perplexity", "paper_bleu")
    return [{**row, **{k: _number(row.get(k)) for k in numeric}} for row in rows if row.get("name")]


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None
