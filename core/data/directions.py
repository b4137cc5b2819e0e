"""One model for both directions of a language pair (Johnson et al., 2017, "Google's Multilingual Neural
Machine Translation System"): every source starts with a token naming the language to translate into,
``<2es> I am here.`` -> ``Estoy aquí.`` and ``<2en> Estoy aquí.`` -> ``I am here.``. The encoder and
decoder are shared, and so is section 3.4's one vocabulary; only the tag tells the model which way to go.

A corpus of (en, es) pairs becomes one of both directions here. Its held-out splits are carved by linked
sentences: two pairs that share an English or a Spanish sentence go to the same split, so that neither
direction's test source (nor any translation of it) was seen in training.
"""
from __future__ import annotations

import random
import re
from typing import Sequence

from .corpus import Pair, ParallelCorpus, held_out_size

TAG = re.compile(r"<2([A-Za-z_]+)> ")


def language_tag(lang: str) -> str:
    """The token that asks for a translation into lang: <2es>."""
    return f"<2{lang}>"


def tagged(text: str, target_lang: str) -> str:
    """text as the source of a translation into target_lang."""
    return f"{language_tag(target_lang)} {text}"


def untagged(text: str) -> str:
    """text without its leading language tag, if it has one."""
    return TAG.sub("", text, count=1) if TAG.match(text) else text


def linked_groups(pairs: Sequence[Pair]) -> list[list[int]]:
    """The pairs' indices grouped so that pairs sharing a source or a target sentence are in one group
    (connected components of the sentence graph; union-find with path halving)."""
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def root(node: tuple[int, str]) -> tuple[int, str]:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for src, tgt in pairs:
        a, b = root((0, src)), root((1, tgt))
        if a != b:
            parent[b] = a
    groups: dict[tuple[int, str], list[int]] = {}
    for i, (src, _) in enumerate(pairs):
        groups.setdefault(root((0, src)), []).append(i)
    return list(groups.values())


def carve_linked(pairs: Sequence[Pair], seed: int, valid_fraction: float | None = None
                 ) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """train, valid and test (core.data.corpus.held_out_size each: 1%, at most 1000, by default), whole linked
    groups at a time, chosen by shuffling the groups with seed."""
    groups = linked_groups(pairs)
    random.Random(seed).shuffle(groups)
    targets = [held_out_size(len(pairs), valid_fraction), held_out_size(len(pairs))]
    held: list[list[int]] = [[], []]
    for group in groups:
        split = next((h for h, target in zip(held, targets) if len(h) < target), None)
        if split is None:
            break
        split.extend(group)
    taken = set(held[0]) | set(held[1])
    train = [p for i, p in enumerate(pairs) if i not in taken]
    if not train:
        raise ValueError(f"carving held-out pairs left no training pairs ({len(pairs)} pairs); add more data")
    return train, *([pairs[i] for i in sorted(h)] for h in held)


def both_ways(pairs: Sequence[Pair], src_lang: str, tgt_lang: str) -> list[Pair]:
    """Each pair forward (tagged for tgt_lang) then backward (tagged for src_lang), interleaved, so that
    the first N of a split hold both directions equally."""
    out: list[Pair] = []
    for src, tgt in pairs:
        out += [(tagged(src, tgt_lang), tgt), (tagged(tgt, src_lang), src)]
    return out


def both_directions(corpus: ParallelCorpus, seed: int = 0, valid_fraction: float | None = None) -> ParallelCorpus:
    """corpus (src -> tgt) as one corpus of both directions, every source tagged with its target language.
    A corpus whose held-out splits were carved is carved again by linked sentences (module docstring); one
    with splits of its own keeps them."""
    splits = (corpus.train, corpus.valid, corpus.test)
    description = dict(corpus.description)
    if "carved" in description:
        splits = carve_linked([*corpus.train, *corpus.valid, *corpus.test], seed, valid_fraction)
        description["carved"] = {**description["carved"], "by": "linked sentences (either side)",
                                 "valid": len(splits[1]), "test": len(splits[2])}
    train, valid, test = (both_ways(split, corpus.src_lang, corpus.tgt_lang) for split in splits)
    description["counts"] = {"train": len(train), "valid": len(valid), "test": len(test)}
    description["directions"] = [[corpus.src_lang, corpus.tgt_lang], [corpus.tgt_lang, corpus.src_lang]]
    return ParallelCorpus(train, valid, test, corpus.src_lang, corpus.tgt_lang, description)


def directions_of(info: dict) -> list[tuple[str, str]]:
    """The (source, target) language pairs a checkpoint's record says its model translates."""
    listed = [(src, tgt) for src, tgt in info.get("directions", [])]
    return listed or [(info.get("src_lang", "src"), info.get("tgt_lang", "tgt"))]
