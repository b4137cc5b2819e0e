"""Sentence pairs and what every corpus reader shares (section 5.1's data): the ParallelCorpus
record, reading UTF-8 text, dropping pairs with an empty side (counted, never silent), choosing the
direction, and carving valid/test splits out of a corpus that has none.

``core.data.files`` (files), ``core.data.huggingface`` (Hugging Face datasets) and ``core.data.tasks`` (synthetic
lecture tasks) build their corpora from these pieces.
"""
from __future__ import annotations

import gzip
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

Pair = tuple[str, str]
MAX_LISTED = 10  # line numbers quoted in an error or kept in the description
HELD_OUT_SHARE, HELD_OUT_MAX = 0.01, 1000  # a carved split by default: 1% of the pairs, at most 1000


@dataclass
class ParallelCorpus:
    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    src_lang: str
    tgt_lang: str
    description: dict  # JSON-serialisable: source, counts, dropped_empty, and how it was read

    def examples(self, n: int = 8) -> list[str]:
        """The first n distinct test sources: the example sentences a checkpoint trained on it offers
        (Tatoeba's test split holds "Tom ate." more than once)."""
        return list(dict.fromkeys(src for src, _ in self.test))[:n]


# ----- reading text -------------------------------------------------------------------
def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file (gzip if the name ends in .gz), as split_lines() gives them."""
    if path.is_dir():
        raise ValueError(f"{path}: a folder, not a file")
    if not path.exists():  # a pipe or a device (<(...), /dev/stdin) is read as a file is
        raise FileNotFoundError(f"{path}: no such file")
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ValueError(f"{path}: not a valid gzip file ({exc})") from None
    return decode_lines(data, str(path))


def decode_lines(data: bytes, name: str, first_line: int = 1) -> list[str]:
    """Lines of UTF-8 bytes read from `name` (a file, stdin; "" for lines typed at a terminal, named by
    their number alone), as split_lines() gives them; data's first line is line `first_line` there."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        where = f"{name} line {line}" if name else f"line {line}"
        raise ValueError(f"{where}: invalid UTF-8 (byte {data[exc.start]:#04x}); save the text as UTF-8") from None
    return split_lines(text)


def split_lines(text: str) -> list[str]:
    """Lines of a text without their endings ("\\n" or "\\r\\n"), a leading BOM dropped. Splits on
    "\\n" only: str.splitlines() would also split on U+2028 and break alignment."""
    lines = text.removeprefix("\ufeff").split("\n")  # Windows editors start UTF-8 files with a BOM
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start another
    return [line.removesuffix("\r") for line in lines]


def stripped_pairs(src: list[str], tgt: list[str]) -> tuple[list[Pair], list[int]]:
    """Stripped pairs and the 1-based line numbers of those dropped for an empty side."""
    pairs, empty = [], []
    for number, (s, t) in enumerate(zip(src, tgt), start=1):
        s, t = s.strip(), t.strip()
        if s and t:
            pairs.append((s, t))
        else:
            empty.append(number)
    return pairs, empty


def read_aligned(src_path: Path, tgt_path: Path) -> tuple[list[Pair], list[int]]:
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(f"{src_path.name} has {len(src)} lines but {tgt_path.name} has {len(tgt)}; "
                         f"line N of one must translate line N of the other")
    return stripped_pairs(src, tgt)


def report_empty(description: dict, empty: dict[str, list[int]]) -> None:
    description["dropped_empty"] = sum(len(lines) for lines in empty.values())
    description["dropped_empty_lines"] = {split: lines[:MAX_LISTED] for split, lines in empty.items() if lines}


def dropped_empty_note(description: dict) -> str:
    """The pairs a corpus left out for an empty side, in words ("" if none), for the trainer's user:
    "3 pairs with an empty side were left out (lines 5, 7, 9)"."""
    count = description.get("dropped_empty", 0)
    if not count:
        return ""
    listed = description.get("dropped_empty_lines", {})
    where = "; ".join(("" if split == "all" else f"{split} ") + "line" + "s" * (len(lines) > 1) + " "
                      + ", ".join(map(str, lines)) for split, lines in listed.items())
    more = ", …" if sum(map(len, listed.values())) < count else ""
    were = "were" if count != 1 else "was"
    return f"{count:,} pair{'s' * (count != 1)} with an empty side {were} left out ({where}{more})"


# ----- languages and splits -----------------------------------------------------------
def pick_langs(available: list[str], src_lang: str | None, tgt_lang: str | None,
                where: str) -> tuple[str, str]:
    """Fill in None languages: with exactly two available, the other one, or sorted order."""
    if len(set(available)) < len(available):
        raise ValueError(f"{where}: a language is named twice ({'-'.join(available)}); name two different ones")
    for field, lang in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
        if lang is not None and lang not in available:
            raise ValueError(f"{where}: {field}={lang!r} is not available; languages: {available}")
    if src_lang is None or tgt_lang is None:
        if len(available) != 2:
            raise ValueError(f"{where}: cannot infer the language pair from {available}; "
                             f"pass src_lang and tgt_lang")
        src_lang = src_lang or next(lang for lang in available if lang != tgt_lang)
        tgt_lang = tgt_lang or next(lang for lang in available if lang != src_lang)
    if src_lang == tgt_lang:
        raise ValueError(f"{where}: src_lang and tgt_lang are both {src_lang!r}; languages: {available}")
    return src_lang, tgt_lang


def held_out_size(n_pairs: int, share: float | None = None) -> int:
    """How many of n_pairs to carve for one held-out split: `share` of them (a valid_fraction), or by default
    1% (at most 1000); at least 1 either way."""
    if share is None:
        return min(HELD_OUT_MAX, max(1, round(HELD_OUT_SHARE * n_pairs)))
    return max(1, round(share * n_pairs))


def check_valid_fraction(valid_fraction: float | None) -> None:
    if valid_fraction is not None and (isinstance(valid_fraction, bool) or not isinstance(valid_fraction, (int, float))
                                       or not 0 < valid_fraction < 1):
        raise ValueError(f"valid_fraction must be a number between 0 and 1 (the share of the pairs held out for "
                         f"validation), got {valid_fraction!r}")


def carve_splits(pairs: list[Pair], seed: int, shares: Sequence[float | None] = (None, None)) -> tuple[list[Pair], ...]:
    """Split one list into train and one held-out split per share (valid and test, or the one a corpus lacks):
    held_out_size pairs each, so 1% (at least 1, at most 1000) for a share of None. Whole groups of pairs
    sharing a source sentence go to one split."""
    held_out = len(shares)
    if len(pairs) < held_out + 1:
        what = "train/valid/test" if held_out == 2 else "a held-out split"
        raise ValueError(f"a corpus without splits needs at least {held_out + 1} pairs to carve {what}, "
                         f"got {len(pairs)}")
    targets = [held_out_size(len(pairs), share) for share in shares]
    by_source: dict[str, list[int]] = {}
    for i, (src, _) in enumerate(pairs):
        by_source.setdefault(src, []).append(i)
    sources = list(by_source)
    random.Random(seed).shuffle(sources)
    held: list[list[int]] = [[] for _ in range(held_out)]
    for src in sources:
        split = next((h for h, target in zip(held, targets) if len(h) < target), None)
        if split is None:
            break
        split.extend(by_source[src])
    taken = set().union(*held)
    train = [p for i, p in enumerate(pairs) if i not in taken]
    if not train:
        raise ValueError(f"carving held-out pairs left no training pairs ({len(pairs)} pairs, "
                         f"{len(by_source)} distinct sources); add more data")
    return train, *([pairs[i] for i in sorted(h)] for h in held)


def carved_corpus(pairs: list[Pair], empty: list[int], src_lang: str, tgt_lang: str, description: dict,
                  seed: int, valid_fraction: float | None = None) -> ParallelCorpus:
    """A corpus of pairs without splits: valid (valid_fraction of the pairs, None: the default share) and
    test carved out of them."""
    try:
        train, valid, test = carve_splits(pairs, seed, (valid_fraction, None))
    except ValueError as exc:
        dropped = f" ({len(empty)} line{'s' * (len(empty) != 1)} with an empty side dropped)" if empty else ""
        raise ValueError(f"{description['source'].removeprefix('files:')}: {exc}{dropped}") from None
    description["counts"] = {"train": len(train), "valid": len(valid), "test": len(test)}
    description["carved"] = {"seed": seed, "valid": len(valid), "test": len(test),
                             **({"valid_fraction": valid_fraction} if valid_fraction is not None else {})}
    report_empty(description, {"all": empty})
    return ParallelCorpus(train, valid, test, src_lang, tgt_lang, description)
