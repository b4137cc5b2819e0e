"""A trained model written for other inference engines: CTranslate2 (ctranslate2.py) and Hugging Face
transformers' MarianMT (marian.py). Each exporter writes into a temporary folder beside the destination,
checks that the written model translates a few sentences as ours does, and only then renames the folder
into place: a failed export leaves nothing behind.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..inference.translation import translate_detailed

CHECK_SENTENCES = 4  # sentences each exporter's self-check translates
# The decoding both sides run in the self-check: section 6.1's beam, with the length penalty the other
# engines share (log P / |Y|^alpha, eos counted: ours "plain").
CHECK_OPTIONS = dict(method="beam", beam_size=4, alpha=0.6, length_penalty="plain")


class ExportError(ValueError):
    """The model cannot be carried by the format, or the exported copy does not translate as ours."""


def check_sentences(bundle: Any, sentences: list[str] | None = None) -> list[str]:
    """The sentences a self-check translates: those given, else the checkpoint's examples, else words of its
    own vocabulary (any model reads those)."""
    if sentences:
        return list(sentences)[:CHECK_SENTENCES]
    examples = [s for s in bundle.info.get("examples", []) if isinstance(s, str) and s.strip()]
    if examples:
        return examples[:CHECK_SENTENCES]
    tokenizer = bundle.tokenizer
    words = [tokenizer.decode([i]) for i in range(4, min(tokenizer.vocab_size, 64))]
    words = [w for w in words if w.strip()] or ["a"]
    return [" ".join(words[4 * i:4 * i + 4]) or words[0] for i in range(CHECK_SENTENCES)]


def our_outputs(bundle: Any, sentences: list[str], **options: Any) -> list[list[str]]:
    """Our translations of sentences as target token strings (eos left out): what the exports must match."""
    results = translate_detailed(bundle, sentences, **{**CHECK_OPTIONS, **options})
    return [r.tokens for r in results]


def mismatch(sentences: list[str], ours: list[list[str]], theirs: list[list[str]], engine: str) -> str | None:
    """None when every output agrees, else one line naming the first sentence that differs."""
    for text, a, b in zip(sentences, ours, theirs):
        if a != b:
            return (f"the {engine} export translates {text[:40]!r} as {' '.join(b)[:60]!r}, ours as "
                    f"{' '.join(a)[:60]!r}: not written")
    return None


def write_checked(out: str | Path, write: Callable[[Path], None], check: Callable[[Path], str | None]) -> Path:
    """write(tmp) fills a fresh temporary folder beside out; check(tmp) returns None or what is wrong. out
    appears, renamed whole, only when the check passes; otherwise ExportError and nothing is left behind."""
    out = Path(out)
    if out.exists():
        raise ExportError(f"{out} already exists; give a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        write(tmp)
        problem = check(tmp)
        if problem:
            raise ExportError(problem)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def vocabulary(tokenizer: Any) -> list[str]:
    """Token strings in id order."""
    return tokenizer.tokens(range(tokenizer.vocab_size))

