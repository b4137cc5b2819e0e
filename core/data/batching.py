"""Section 5.1: "Sentence pairs were batched together by approximate sequence length.
Each training batch contained a set of sentence pairs containing approximately 25000
source tokens and 25000 target tokens."

``TokenBatcher`` sorts examples by length and cuts them into batches of at most
``max_tokens`` padded slots (fairseq's ``--max-tokens``), so sentences of similar length
share a batch and little compute goes to padding. With a ``bucket``, every batch is padded to one of
a few fixed shapes (lengths to a multiple of it, rows to max_tokens // length), so a compiled step
meets each shape once. ``sentence_batches`` is the usual
fixed number of random sentences per batch, kept for the throughput comparison.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from .tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer


@dataclass
class Example:
    src: list[int]  # tokens + [EOS]
    tgt: list[int]  # [BOS] + tokens + [EOS]


def source_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The encoder's input for text: its tokens + [EOS], the form encode_pairs gives training sources."""
    return tokenizer.encode(text) + [EOS_ID]


def checked_pair(pair: object, index: int) -> tuple[str, str]:
    """pair, if it is a (source, target) pair of strings; else a TypeError naming pairs[index]: a list of
    sentences, or one string, would otherwise be read character by character without a word."""
    if isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(text, str) for text in pair):
        return pair[0], pair[1]
    raise TypeError(f"pairs[{index}] must be a (source, target) pair of strings, got {type(pair).__name__} "
                    f"{str(pair)[:60]!r}")


def encode_pairs(pairs: Sequence[tuple[str, str]], tokenizer: Tokenizer, max_len: int,
                 target_tokenizer: Tokenizer | None = None) -> tuple[list[Example], int]:
    """Tokenise sentence pairs, the targets with target_tokenizer when the vocabularies are separate (None:
    tokenizer reads both sides). Pairs whose source or target (with BOS/EOS) is longer than max_len tokens
    are left out; their number is returned for the caller to report."""
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 2:
        raise ValueError(f"max_len must be an integer >= 2, got {max_len!r}")
    pairs = [checked_pair(pair, i) for i, pair in enumerate(pairs)]
    srcs = tokenizer.encode_batch([s for s, _ in pairs])
    tgts = (target_tokenizer or tokenizer).encode_batch([t for _, t in pairs])
    examples = [Example(s + [EOS_ID], [BOS_ID] + t + [EOS_ID]) for s, t in zip(srcs, tgts)]
    kept = [e for e in examples if len(e.src) <= max_len and len(e.tgt) <= max_len]
    return kept, len(examples) - len(kept)


TOO_MANY_UNKNOWN = 0.01  # a share of <unk> training tokens worth telling the user about


def unknown_share(examples: Sequence[Example]) -> float:
    """The share of the examples' tokens (BOS/EOS aside) that are <unk>: what a vocabulary too small
    for the data costs. A model trained on mostly <unk> still scores well on token accuracy."""
    tokens = unknown = 0
    for e in examples:
        for ids in (e.src[:-1], e.tgt[1:-1]):
            tokens += len(ids)
            unknown += ids.count(UNK_ID)
    return unknown / max(tokens, 1)


def unknown_from_rare_words(tokenizer: Tokenizer, asked_size: int) -> bool:
    """Whether a vocabulary's <unk> are words seen only once (Tokenizer.train keeps a word seen twice),
    not words a larger vocabulary would take in: a word vocabulary that stayed short of the size asked."""
    return tokenizer.kind == "word" and tokenizer.vocab_size < asked_size


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) long, right-padded with PAD_ID
    tgt_in: torch.Tensor  # (B, T) = tgt[:, :-1], the decoder's input (teacher forcing)
    tgt_out: torch.Tensor  # (B, T) = tgt[:, 1:], what it must predict
    n_tgt_tokens: int  # non-pad positions of tgt_out: the tokens the loss is averaged over
    padding_ratio: float  # pad slots / all slots, over src and tgt together

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """non_blocking: to a GPU from pinned memory, queued without waiting for the GPU to catch up."""
        pin = non_blocking and torch.device(device).type == "cuda"
        src, tgt_in, tgt_out = ((t.pin_memory() if pin else t).to(device, non_blocking=non_blocking)
                                for t in (self.src, self.tgt_in, self.tgt_out))
        return Batch(src, tgt_in, tgt_out, self.n_tgt_tokens, self.padding_ratio)


def pad_ids(seqs: Sequence[Sequence[int]], device: torch.device | str | None = None,
            width: int | None = None) -> torch.Tensor:
    """Right-pad id lists with PAD_ID into one (len(seqs), width) tensor (width None: the longest)."""
    width = width or max(map(len, seqs))
    return torch.tensor([list(seq) + [PAD_ID] * (width - len(seq)) for seq in seqs], dtype=torch.long,
                        device=device)


def pad_batch(examples: Sequence[Example], width: int | None = None, rows: int | None = None) -> Batch:
    """Stack examples into right-padded tensors. width: the source's and the decoder input's length (None: the
    longest of each); rows: filled up with rows that hold no target token ([EOS] -> [BOS]: not one fully
    masked attention row, so nothing NaN), which add nothing to the loss nor its gradient."""
    if not examples:
        raise ValueError("pad_batch needs at least one example")
    filler = [Example([EOS_ID], [BOS_ID])] * max(0, (rows or 0) - len(examples))
    src = pad_ids([e.src for e in [*examples, *filler]], width=width)
    tgt = pad_ids([e.tgt for e in [*examples, *filler]], width=width and width + 1)
    n_src = sum(len(e.src) for e in examples)
    n_tgt = sum(len(e.tgt) for e in examples)
    slots = src.numel() + tgt.numel()
    return Batch(src, tgt[:, :-1], tgt[:, 1:], n_tgt - len(examples), (slots - n_src - n_tgt) / slots)


def _check_examples(examples: Sequence[Example]) -> None:
    if not examples:
        raise ValueError("no examples to batch (is the corpus empty, or was everything longer than max_len?)")


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


class TokenBatcher:
    """Length-bucketed batches of at most max_tokens padded slots, where a batch costs
    B * max(longest source, longest target) like fairseq's --max-tokens. An example
    longer than max_tokens on its own gets a batch of one.

    Iterating gives one epoch and resumes where the last iteration stopped; a finished
    pass advances ``epoch``. ``state_dict()`` saved after a batch was used resumes with
    the next one. Batch contents and order depend only on (seed, epoch).

    bucket > 0: a batch's length is its longest sentence rounded up to a multiple of bucket, and its rows
    max_tokens // length (filled up with empty rows): at most max_len / bucket shapes in all."""

    def __init__(self, examples: Sequence[Example], max_tokens: int, *, shuffle: bool = True, seed: int = 0,
                 bucket: int = 0):
        _check_examples(examples)
        _check_positive("max_tokens", max_tokens)
        if not isinstance(bucket, int) or isinstance(bucket, bool) or bucket < 0:
            raise ValueError(f"bucket must be a whole number >= 0 (0: off), got {bucket!r}")
        self.examples = list(examples)
        self.max_tokens = max_tokens
        self.bucket = bucket
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.position = 0  # batches of the current epoch already handed out
        self._cache: tuple[tuple[int, int], list[list[int]]] | None = None  # (seed, epoch) -> batches

    def _size(self, i: int) -> int:
        e = self.examples[i]
        return self._width(max(len(e.src), len(e.tgt)))

    def _width(self, length: int) -> int:
        """length, rounded up to the bucket's multiple (unchanged without buckets)."""
        return -(-length // self.bucket) * self.bucket if self.bucket else length

    def _pad(self, batch: list[int]) -> Batch:
        examples = [self.examples[i] for i in batch]
        if not self.bucket:
            return pad_batch(examples)
        width = max(self._size(i) for i in batch)
        return pad_batch(examples, width=width, rows=max(1, self.max_tokens // width))

    def _cut(self, order: list[int]) -> list[list[int]]:
        batches, batch, longest = [], [], 0
        for i in order:
            longest_with = max(longest, self._size(i))
            if batch and longest_with * (len(batch) + 1) > self.max_tokens:
                batches.append(batch)
                batch, longest_with = [], self._size(i)
            batch.append(i)
            longest = longest_with
        batches.append(batch)
        return batches

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The example indices of each batch of an epoch, in the order they are served."""
        if self._cache and self._cache[0] == (self.seed, epoch):
            return self._cache[1]
        order = list(range(len(self.examples)))
        rng = random.Random(f"{self.seed}:{epoch}")  # not seed + epoch: (0, 1) and (1, 0) would match
        if self.shuffle:
            rng.shuffle(order)  # random tie-breaking: equal lengths meet new neighbours each epoch
        order.sort(key=lambda i: (len(self.examples[i].src), len(self.examples[i].tgt)))
        batches = self._cut(order)
        if self.shuffle:
            rng.shuffle(batches)  # no epoch that runs from short to long sentences
        self._cache = ((self.seed, epoch), batches)
        return batches

    def __len__(self) -> int:
        return len(self.epoch_batches(self.epoch))

    def __iter__(self) -> Iterator[Batch]:
        batches = self.epoch_batches(self.epoch)
        while self.position < len(batches):
            self.position += 1  # before yielding: state saved while this batch is in use resumes after it
            yield self._pad(batches[self.position - 1])
        self.epoch += 1
        self.position = 0

    def batches_forever(self) -> Iterator[Batch]:
        while True:
            yield from self

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed,
                "n_examples": len(self.examples), "max_tokens": self.max_tokens, "bucket": self.bucket}

    def load_state_dict(self, state: dict[str, int]) -> None:
        mine = {"n_examples": len(self.examples), "max_tokens": self.max_tokens, "bucket": self.bucket}
        for key in mine:
            saved = state.get(key, 0 if key == "bucket" else None)  # states saved before buckets had none
            if saved != mine[key]:
                raise ValueError(f"TokenBatcher state has {key}={saved!r} but this batcher has {mine[key]}; "
                                 f"resume with the same data, max_tokens and bucket")
        self.epoch, self.position, self.seed = state["epoch"], state["position"], state["seed"]


def sentence_batches(examples: Sequence[Example], batch_size: int, *, shuffle: bool = True,
                     seed: int = 0) -> list[Batch]:
    """Fixed-size batches of random sentences (no length bucketing), for comparison."""
    _check_examples(examples)
    _check_positive("batch_size", batch_size)
    order = list(range(len(examples)))
    if shuffle:
        random.Random(seed).shuffle(order)
    return [pad_batch([examples[i] for i in order[k:k + batch_size]]) for k in range(0, len(order), batch_size)]
