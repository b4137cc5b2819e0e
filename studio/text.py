"""Making user text safe to show: everything a user typed is rendered as text, never markup, in Markdown and
tables, in toasts and in refusals (Gradio renders those as HTML); short excerpts of it for messages, and the
word-level difference of two translations."""
from __future__ import annotations

import difflib
import html
import re
from typing import Sequence

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>$])")


def word_diff(a: str, b: str) -> list[tuple[str, list[str], list[str]]]:
    """difflib's opcodes over the two translations' words: (tag, A's words, B's words) with tag "equal",
    "replace", "delete" (only in A) or "insert" (only in B). Words, not tokens: two vocabularies cut a
    sentence differently, and a reader compares words."""
    words_a, words_b = a.split(), b.split()
    matcher = difflib.SequenceMatcher(a=words_a, b=words_b, autojunk=False)
    return [(tag, words_a[i1:i2], words_b[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


def md(text: str) -> str:
    """text escaped for gr.Markdown: HTML entities first, then Markdown punctuation."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", html.escape(str(text), quote=False))


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[int] = (),
             caption: str = "") -> str:
    """A Markdown table (a real <table>: it wraps on a phone and reads as a table to a screen reader,
    where Gradio's Dataframe sized its columns by script and drew its rows as boxes). Every cell is
    escaped text on one line; the columns numbered in `numeric` are aligned right; a caption, escaped
    too, goes above."""
    def cell(value: object) -> str:
        return md(" ".join(str(value).split())) or " "
    align = ["---:" if i in numeric else "---" for i in range(len(headers))]
    lines = [headers, align] + [[cell(v) for v in row] for row in rows]
    table = "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)
    return f"{md(caption)}\n\n{table}" if caption else table


def clip(text: str, limit: int = 80) -> str:
    """A short excerpt of text for messages."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def warn(message: object) -> None:
    """A warning toast; Gradio renders toast text as HTML, so it is escaped."""
    import gradio as gr

    gr.Warning(html.escape(str(message), quote=False))


def info(message: object) -> None:
    """An information toast for 5 s (Gradio's 10 s let a few translations stack them over the controls)."""
    import gradio as gr

    gr.Info(html.escape(str(message), quote=False), duration=5)


def refusal(message: object) -> Exception:
    """A gr.Error that says message (escaped: Gradio renders it as HTML) and leaves no traceback in the server log:
    the visitor's input or request was refused, nothing went wrong."""
    import gradio as gr

    return gr.Error(html.escape(str(message), quote=False), print_exception=False)
