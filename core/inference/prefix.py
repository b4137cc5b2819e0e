"""A forced beginning for a translation (prefix decoding, as fairseq's ``--prefix-size`` and
interactive translation tools offer): the decoders write the prefix's tokens first, then go on
by themselves (core.inference.step_rules.constrain). The decoder is auto-regressive (section 3), so what
follows is the model's continuation of that beginning, and the prefix's own log-probabilities
are the model's real ones for those tokens.

The prefix is text, encoded as the start of a sentence is: a subword tokenizer marks its first
word as a word start (SentencePiece's "▁"), exactly as in the tokens of a whole sentence that
begins with it. Runs of whitespace are read as one space and the ends are trimmed: a trailing
space would be a lone "▁" token, one the tokenizer never writes before a word. The prefix is
taken as whole words; if the model continues its last word ("Two youn" + "g"), the output's
first tokens are not how the tokenizer would split that beginning, and a notice says so.
"""
from __future__ import annotations

import unicodedata
from typing import Any

from ..data.tokenizer import Tokenizer


def prefix_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The ids a prefix forces ([] for an empty one). ValueError for text that this vocabulary
    cannot write (it would be forced as <unk>) or whose tokens do not read back as the text."""
    if not isinstance(text, str):
        raise TypeError(f"must be a str, got {type(text).__name__}")
    text = " ".join(text.split())
    if not text:
        return []
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise ValueError(f"{text[:40]!r} holds a lone surrogate, not text: was it read from bytes that "
                         f"are not UTF-8?")
    unknown = tokenizer.unknown_pieces(text)
    if unknown:
        shown = ", ".join(repr(p) for p in dict.fromkeys(unknown))
        raise ValueError(f"{text!r}: this model's vocabulary cannot write {shown} (it would be forced as "
                         f"<unk>)")
    ids = tokenizer.encode(text)
    back = tokenizer.decode(ids)
    if back != unicodedata.normalize("NFC", text):
        raise ValueError(f"{text!r}: the tokenizer cannot form it as the start of a sentence (its tokens "
                         f"{' '.join(tokenizer.tokens(ids))} read back as {back!r})")
    return ids


def prefixes_for(tokenizer: Tokenizer, prefix: Any, sentences: int, longest: int) -> list[list[int]]:
    """Per sentence, the ids its prefix forces: `prefix` is None, one str for every sentence, or a list
    of one str per sentence. longest: the most tokens an output may hold with its <eos>."""
    if prefix is None:
        return [[] for _ in range(sentences)]
    if isinstance(prefix, str):
        return [_checked(tokenizer, prefix, longest, "prefix")] * sentences
    if not isinstance(prefix, (list, tuple)):
        raise TypeError(f"prefix must be a str (one for every sentence) or a list of str (one per sentence), got "
                        f"{type(prefix).__name__}")
    if len(prefix) != sentences:
        raise ValueError(f"prefix has {len(prefix)} entries but there are {sentences} sentences; give one str for "
                         f"all of them or one per sentence")
    return [_checked(tokenizer, text, longest, f"prefix[{i}]") for i, text in enumerate(prefix)]


def _checked(tokenizer: Tokenizer, text: str, longest: int, what: str) -> list[int]:
    try:
        ids = prefix_ids(tokenizer, text)
    except (TypeError, ValueError) as exc:  # named as the caller's argument
        raise type(exc)(f"{what} {exc}") from None
    if len(ids) + 1 > longest:
        raise ValueError(f"{what} is {len(ids)} tokens, but this model writes at most {longest - 1} tokens and "
                         f"<eos>")
    return ids


def prefix_notice(tokenizer: Tokenizer, prefix: list[int], ids: list[int]) -> str | None:
    """A notice when an output's forced first tokens are not how the tokenizer splits its beginning:
    the model continued the prefix's last word, from a split it was never trained on."""
    if not prefix or len(ids) <= len(prefix) or tokenizer.encode(tokenizer.decode(ids))[:len(prefix)] == prefix:
        return None
    return ("the output continues the prefix's last word, so its first tokens are not how the tokenizer splits "
            "them (a split the model never read in training); give the prefix as whole words")
