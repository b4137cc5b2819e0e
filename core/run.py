"""Preparing a training run (section 5.1's data, 5.2's model): read the corpus, learn the shared
vocabulary, build the model, encode the pairs, and note what the run will not see as given.

``train_cli.py`` and the studio's Train tab both prepare their runs here; each only words the notes
(``RunNotes``) for its own user. A single process calls ``prepare_run``; ``train_cli`` under
torchrun calls the steps one by one, so that rank 0 alone learns the vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .batching import (
    TOO_MANY_UNKNOWN,
    Example,
    checked_pair,
    encode_pairs,
    unknown_from_rare_words,
    unknown_share,
)
from .bundle import ModelBundle, check_fits, resolve_device
from .config import ModelConfig
from .corpus import ParallelCorpus, dropped_empty_note
from .data import load_corpus
from .model import Transformer
from .tasks import TOKENIZER_KIND
from .tokenizer import Tokenizer

FEW_PAIRS = 100  # fewer training pairs than this can be learnt by heart, not generalised from


@dataclass(frozen=True)
class RunPlan:
    """What a new run is asked to be, before any data is read: its corpus, vocabulary and model."""

    data: str  # a corpus spec (core.data): synthetic:NAME, files:PATH, hf:NAME[:CONFIG]
    src_lang: str | None = None
    tgt_lang: str | None = None
    seed: int = 0  # the data split, the training sample (limit) and the model's initialisation
    limit: int | None = None  # training pairs kept (None: all)
    preset: str = "small"
    model_overrides: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields over the preset's
    vocab_size: int = 8000  # at most this many vocabulary entries
    tokenizer_kind: str | None = None  # None: whole words for synthetic tasks, BPE otherwise

    @property
    def tokenizer(self) -> str:
        if self.tokenizer_kind:
            return self.tokenizer_kind
        return TOKENIZER_KIND if self.data.startswith("synthetic:") else "bpe"

    def planned_config(self) -> ModelConfig:
        """The model at its largest (a vocabulary of vocab_size): limits are checked on it before the
        corpus is read and the vocabulary learnt."""
        return self.config_for(self.vocab_size)

    def config_for(self, vocab_size: int) -> ModelConfig:
        return ModelConfig.from_preset(self.preset, src_vocab_size=vocab_size, tgt_vocab_size=vocab_size,
                                       **self.model_overrides)


@dataclass(frozen=True)
class RunNotes:
    """What the run will not see as given, as facts; the front ends put them in words."""

    training_pairs: int
    validation_pairs: int
    dropped_empty: str = ""  # core.corpus.dropped_empty_note's sentence; "" when no pair had an empty side
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
    """The plan's corpus, refused when it leaves nothing to train on or to validate with."""
    corpus = load_corpus(plan.data, plan.src_lang, plan.tgt_lang, seed=plan.seed, limit=plan.limit)
    if not corpus.train or not (corpus.valid or corpus.test):
        raise ValueError(f"{plan.data} has no training or no validation pairs")
    return corpus


def learn_tokenizer(corpus: ParallelCorpus, plan: RunPlan) -> Tokenizer:
    """One vocabulary for both languages (section 5.1's shared BPE), learnt from the training pairs."""
    texts = (text for i, pair in enumerate(corpus.train) for text in checked_pair(pair, i))
    return Tokenizer.train(texts, plan.vocab_size, plan.tokenizer)


def build_bundle(plan: RunPlan, tokenizer: Tokenizer, corpus: ParallelCorpus, info: dict[str, Any]) -> ModelBundle:
    """A fresh model for the tokenizer, initialised from the plan's seed, with its record of the data."""
    torch.manual_seed(plan.seed)
    model = Transformer(plan.config_for(tokenizer.vocab_size))
    record = {"src_lang": corpus.src_lang, "tgt_lang": corpus.tgt_lang, "data": corpus.description,
              "examples": corpus.examples(), **info}
    return ModelBundle(model, tokenizer, record)


def encode_run_data(corpus: ParallelCorpus, bundle: ModelBundle, max_tokens: int,
                    asked_vocab_size: int) -> tuple[list[Example], list[Example], RunNotes]:
    """The training and validation pairs as token ids, and notes on what the run will not see as given.
    Refused when every training pair is too long for the model."""
    max_len = bundle.model.config.max_len
    train, too_long = encode_pairs(corpus.train, bundle.tokenizer, max_len)
    valid, _ = encode_pairs(corpus.valid, bundle.tokenizer, max_len)
    if not train:
        raise ValueError(f"every training pair of {corpus.description.get('source', 'the corpus')} is longer "
                         f"than {max_len} tokens")
    notes = RunNotes(training_pairs=len(train), validation_pairs=len(corpus.valid),
                     dropped_empty=dropped_empty_note(corpus.description), too_long=too_long, max_len=max_len,
                     unknown_share=unknown_share(train),
                     unknown_from_rare_words=unknown_from_rare_words(bundle.tokenizer, asked_vocab_size),
                     over_max_tokens=sum(max(len(e.src), len(e.tgt)) > max_tokens for e in train))
    return train, valid, notes


def prepare_run(plan: RunPlan, *, max_tokens: int, device: str | torch.device = "auto",
                info: dict[str, Any] | None = None) -> PreparedRun:
    """Everything a new run needs, in one process: the model is checked to fit on the device before
    the corpus is read, and info (its name, its training settings) goes into the checkpoint's record."""
    check_fits(plan.planned_config(), resolve_device(device) if isinstance(device, str) else device)
    corpus = read_corpus(plan)
    bundle = build_bundle(plan, learn_tokenizer(corpus, plan), corpus, info or {})
    train, valid, notes = encode_run_data(corpus, bundle, max_tokens, plan.vocab_size)
    return PreparedRun(corpus, bundle, train, valid, notes)
