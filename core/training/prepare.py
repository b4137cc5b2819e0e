"""Preparing a training run (section 5.1's data, 5.2's model): read the corpus, learn the shared
vocabulary (or one per language), build the model, encode the pairs, and note what the run will not
see as given.

``train_cli.py`` and the studio's Train tab both prepare their runs here; each only words the notes
(``RunNotes``) for its own user. A single process calls ``prepare_run``; ``train_cli`` under
torchrun calls the steps one by one, so that rank 0 alone learns the vocabulary.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..bundle import ModelBundle, check_fits, resolve_device
from ..data.batching import (
    TOO_MANY_UNKNOWN,
    Example,
    checked_pair,
    encode_pairs,
    unknown_from_rare_words,
    unknown_share,
)
from ..data.corpus import ParallelCorpus, dropped_empty_note
from ..data.directions import both_directions, language_tag, untagged
from ..data.files import load_corpus
from ..data.mixture import with_training_pairs
from ..data.tasks import TOKENIZER_KIND
from ..data.tokenizer import Tokenizer
from ..model.config import ModelConfig
from ..model.transformer import Transformer

FEW_PAIRS = 100  # fewer training pairs than this can be learnt by heart, not generalised from


@dataclass(frozen=True)
class RunPlan:
    """What a new run is asked to be, before any data is read: its corpus, vocabulary and model."""

    data: str  # a corpus spec (core.data.files): synthetic:NAME, files:PATH, hf:NAME[:CONFIG]
    src_lang: str | None = None
    tgt_lang: str | None = None
    seed: int = 0  # the data split, the training sample (limit) and the model's initialisation
    limit: int | None = None  # training pairs kept (None: all)
    valid_fraction: float | None = None  # share carved out for validation from data without a valid split
    preset: str = "small"
    model_overrides: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields over the preset's
    vocab_size: int = 8000  # at most this many vocabulary entries
    tokenizer_kind: str | None = None  # None: whole words for synthetic tasks, BPE otherwise
    # Section 3.4 shares one vocabulary between the languages (and ties three matrices); True learns one per
    # language, of at most src_vocab_size and tgt_vocab_size entries (None: vocab_size).
    separate_vocab: bool = False
    src_vocab_size: int | None = None
    tgt_vocab_size: int | None = None
    # One model for both directions, each source tagged with its target language (core/data/directions.py).
    both_directions: bool = False
    # Another corpus whose training pairs join data's (core/data/mixture.py): its held-out splits go unused.
    also_train_on: str | None = None

    def __post_init__(self) -> None:
        if not self.separate_vocab and (self.src_vocab_size is not None or self.tgt_vocab_size is not None):
            raise ValueError("src_vocab_size and tgt_vocab_size size separate vocabularies: set separate_vocab, "
                             "or give vocab_size for the shared one")
        if self.both_directions and self.separate_vocab:
            raise ValueError("both_directions needs one shared vocabulary: each language is a source and a target")

    @property
    def vocab_sizes(self) -> tuple[int, int]:
        """The most entries each side's vocabulary may have (one vocabulary: the same number twice)."""
        if not self.separate_vocab:
            return self.vocab_size, self.vocab_size
        return self.src_vocab_size or self.vocab_size, self.tgt_vocab_size or self.vocab_size

    @property
    def tokenizer(self) -> str:
        if self.tokenizer_kind:
            return self.tokenizer_kind
        return TOKENIZER_KIND if self.data.startswith("synthetic:") else "bpe"

    def planned_config(self) -> ModelConfig:
        """The model at its largest (vocabularies of vocab_sizes): limits are checked on it before the
        corpus is read and the vocabulary learnt."""
        return self.config_for(*self.vocab_sizes)

    def config_for(self, src_vocab_size: int, tgt_vocab_size: int) -> ModelConfig:
        return ModelConfig.from_preset(self.preset, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                                       shared_vocab=not self.separate_vocab, **self.model_overrides)


@dataclass(frozen=True)
class RunNotes:
    """What the run will not see as given, as facts; the front ends put them in words."""

    training_pairs: int
    validation_pairs: int
    dropped_empty: str = ""  # core.data.corpus.dropped_empty_note's sentence; "" when no pair had an empty side
    too_long: int = 0  # training pairs longer than the model's max_len, left out
    max_len: int = 0
    unknown_share: float = 0.0  # of the training tokens that are <unk>
    unknown_from_rare_words: bool = False  # they are words seen once, which a larger vocabulary would not take in
    over_max_tokens: int = 0  # training pairs longer than the batch budget: each is a batch of its own

    @property
    def many_unknown(self) -> bool:
        return self.unknown_share > TOO_MANY_UNKNOWN

    @property
    def few_pairs(self) -> bool:
        return self.training_pairs < FEW_PAIRS


@dataclass
class PreparedRun:
    corpus: ParallelCorpus
    bundle: ModelBundle
    train: list[Example]
    valid: list[Example]
    notes: RunNotes


def read_corpus(plan: RunPlan) -> ParallelCorpus:
    """The plan's corpus (with also_train_on's training pairs), refused when it leaves nothing to train on or to
    validate with."""
    corpus = load_corpus(plan.data, plan.src_lang, plan.tgt_lang, seed=plan.seed, limit=plan.limit,
                         valid_fraction=plan.valid_fraction)
    if not corpus.train or not (corpus.valid or corpus.test):
        raise ValueError(f"{plan.data} has no training or no validation pairs")
    if plan.both_directions:
        corpus = both_directions(corpus, plan.seed, plan.valid_fraction)
    if plan.also_train_on:
        extra = load_corpus(plan.also_train_on, corpus.src_lang, corpus.tgt_lang, seed=plan.seed)
        corpus = with_training_pairs(corpus, extra, both_directions=plan.both_directions)
    return corpus


def learn_tokenizers(corpus: ParallelCorpus, plan: RunPlan,
                     check: Callable[[], None] | None = None) -> tuple[Tokenizer, Tokenizer | None]:
    """The vocabularies, learnt from the training pairs: (one for both languages, None), section 5.1's shared
    BPE; or with plan.separate_vocab (the source's, the target's), each from its own side. check: Tokenizer.train's,
    called as the texts are read (what it raises stops the learning)."""
    pairs = [checked_pair(pair, i) for i, pair in enumerate(corpus.train)]
    if plan.both_directions:  # every sentence is a source once and a target once: learn from each once, untagged
        tags = [language_tag(lang) for lang in (corpus.src_lang, corpus.tgt_lang)]
        tokenizer = Tokenizer.train((untagged(pair[0]) for pair in pairs), plan.vocab_size - len(tags), plan.tokenizer,
                                    check=check)
        return tokenizer.add_language_tags(tags), None
    if not plan.separate_vocab:
        return Tokenizer.train((text for pair in pairs for text in pair), plan.vocab_size, plan.tokenizer,
                               check=check), None
    (src_size, tgt_size), learnt = plan.vocab_sizes, []
    for side, size, texts in (("src", src_size, [s for s, _ in pairs]), ("tgt", tgt_size, [t for _, t in pairs])):
        try:
            learnt.append(Tokenizer.train(texts, size, plan.tokenizer, check=check))
        except ValueError as exc:  # Tokenizer.train names its vocab_size: say which side's it was
            raise ValueError(re.sub(r"^vocab_size\b", f"{side}_vocab_size", str(exc))) from None
    return learnt[0], learnt[1]


def build_bundle(plan: RunPlan, tokenizer: Tokenizer, corpus: ParallelCorpus, info: dict[str, Any],
                 target_tokenizer: Tokenizer | None = None) -> ModelBundle:
    """A fresh model for the tokenizers (target_tokenizer: the target's own, with separate vocabularies),
    initialised from the plan's seed, with its record of the data."""
    torch.manual_seed(plan.seed)
    model = Transformer(plan.config_for(tokenizer.vocab_size, (target_tokenizer or tokenizer).vocab_size))
    record = {"src_lang": corpus.src_lang, "tgt_lang": corpus.tgt_lang, "data": corpus.description,
              "examples": corpus.examples(), **info}
    if "directions" in corpus.description:
        record["directions"] = corpus.description["directions"]
    return ModelBundle(model, tokenizer, record, separate_target=target_tokenizer)


def encode_run_data(corpus: ParallelCorpus, bundle: ModelBundle, max_tokens: int,
                    asked_vocab_sizes: tuple[int, int]) -> tuple[list[Example], list[Example], RunNotes]:
    """The training and validation pairs as token ids, and notes on what the run will not see as given
    (asked_vocab_sizes: the most entries the plan allowed each side's vocabulary, RunPlan.vocab_sizes).
    Refused when every training pair is too long for the model."""
    max_len = bundle.model.config.max_len
    train, too_long = encode_pairs(corpus.train, bundle.tokenizer, max_len, bundle.separate_target)
    valid, _ = encode_pairs(corpus.valid, bundle.tokenizer, max_len, bundle.separate_target)
    if not train:
        raise ValueError(f"every training pair of {corpus.description.get('source', 'the corpus')} is longer "
                         f"than {max_len} tokens")
    notes = RunNotes(training_pairs=len(train), validation_pairs=len(corpus.valid),
                     dropped_empty=dropped_empty_note(corpus.description), too_long=too_long, max_len=max_len,
                     unknown_share=unknown_share(train),
                     unknown_from_rare_words=any(
                         unknown_from_rare_words(tokenizer, asked)
                         for tokenizer, asked in zip((bundle.tokenizer, bundle.target_tokenizer), asked_vocab_sizes)),
                     over_max_tokens=sum(max(len(e.src), len(e.tgt)) > max_tokens for e in train))
    return train, valid, notes


Learn = Callable[[ParallelCorpus, RunPlan], tuple[Tokenizer, Tokenizer | None]]


def prepare_run(plan: RunPlan, *, max_tokens: int, device: str | torch.device = "auto",
                info: dict[str, Any] | None = None, learn: Learn = learn_tokenizers,
                resume: Callable[[ParallelCorpus], ModelBundle] | None = None) -> PreparedRun:
    """Everything a run needs: a new run's model is checked to fit on the device before the corpus is read,
    and info (its name, its training settings) goes into the checkpoint's record. The studio, train_cli.py and
    bench/table3.py all prepare their runs here.

    learn: how the vocabulary is learnt (under torchrun, rank 0 learns it and sends it to the others).
    resume: the bundle of a run taken up again, given the corpus (its vocabulary and weights are the run's own)."""
    if resume is None:
        check_fits(plan.planned_config(), resolve_device(device) if isinstance(device, str) else device)
    corpus = read_corpus(plan)
    if resume is not None:
        bundle = resume(corpus)
    else:
        tokenizer, target_tokenizer = learn(corpus, plan)
        bundle = build_bundle(plan, tokenizer, corpus, info or {}, target_tokenizer)
    train, valid, notes = encode_run_data(corpus, bundle, max_tokens, plan.vocab_sizes)
    return PreparedRun(corpus, bundle, train, valid, notes)
