"""A lesson to present (issue 53): a Markdown file, a title, then steps, each a heading, a few lines of notes for
the presenter and one deep link (address.py) to the view the class should see.

    # Attention Is All You Need, in 14 views

    ## Words become vectors (3.4)
    Each token is a row of the embedding matrix, scaled by √d_model.
    [Open](?tab=model&model=multi30k-de-en-small)

The link is the step's first Markdown link whose target starts with "?", or a line that is one such query on its
own. A step may ask the class a question before its view answers it, with one ``Ask`` line (questions.py).
``read_lesson`` refuses a file that is not of this form with the line that is wrong. No Gradio here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .questions import Question, parse_ask

LINK = re.compile(r"\]\((\?[^)\s]*)\)|^(\?\S+)$")
ONLY_A_LINK = re.compile(r"\[[^\]]*\]\(\?[^)\s]*\)")
MAX_STEPS = 60
MAX_BYTES = 200_000


@dataclass(frozen=True)
class Step:
    heading: str
    notes: str  # Markdown; a line that is only the link left out
    link: str  # "?tab=...": a query string
    question: Question | None = None  # what the class is asked before the view answers it


@dataclass(frozen=True)
class Lesson:
    title: str
    steps: tuple[Step, ...]


def read_lesson(path: str | Path) -> Lesson:
    """The lesson in the Markdown file at path; ValueError naming the file and line when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such lesson file")
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size:,} bytes; a lesson is at most {MAX_BYTES:,}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from None
    return parse_lesson(text, str(path))


def parse_lesson(text: str, name: str = "lesson") -> Lesson:
    """The lesson in Markdown text (name: what an error calls it)."""
    title, steps, current = None, [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("# ") and title is None and current is None:
            title = line[2:].strip()
        elif line.startswith("## "):
            current = {"heading": line[3:].strip(), "line": number, "notes": [], "links": [], "asks": []}
            steps.append(current)
        elif current is not None and line.startswith("Ask "):
            try:
                current["asks"].append((number, parse_ask(line)))
            except ValueError as exc:
                raise ValueError(f"{name} line {number}: {exc}") from None
        elif current is not None:
            found = LINK.search(line.strip())
            if found:
                current["links"].append((number, found.group(1) or found.group(2)))
                if found.group(2) or ONLY_A_LINK.fullmatch(line.strip()):  # the link alone: not a note
                    continue
            current["notes"].append(line)
        elif line.strip():
            raise ValueError(f"{name} line {number}: text before the first step; a lesson is '# Title', then "
                             f"'## Step' headings, each with notes and one link such as [Open](?tab=attention)")
    if title is None:
        raise ValueError(f"{name}: no title; a lesson starts with a '# Title' line")
    if not steps:
        raise ValueError(f"{name}: no steps; each step is a '## Heading' line with notes and one link")
    if len(steps) > MAX_STEPS:
        raise ValueError(f"{name}: {len(steps)} steps; a lesson has at most {MAX_STEPS}")
    return Lesson(title, tuple(_step(s, name) for s in steps))


def _step(raw: dict, name: str) -> Step:
    if len(raw["links"]) != 1:
        lines = ", ".join(str(n) for n, _ in raw["links"])
        said = f"{len(raw['links'])} links (lines {lines})" if raw["links"] else "no link"
        raise ValueError(f"{name} line {raw['line']}: step '{raw['heading']}' has {said}; it needs exactly one, "
                         f"such as [Open](?tab=attention&source=...)")
    if len(raw["asks"]) > 1:
        raise ValueError(f"{name} line {raw['asks'][1][0]}: step '{raw['heading']}' asks twice; a step asks one "
                         f"question")
    notes = "\n".join(raw["notes"]).strip()
    return Step(raw["heading"], notes, raw["links"][0][1], raw["asks"][0][1] if raw["asks"] else None)
