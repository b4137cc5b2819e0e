"""Lessons (issue 53, studio/links/lesson.py): a lesson file of steps, each with notes and one link, refused with
its line when it is not of that form; the shipped lesson walks the paper in 12-16 steps."""
from __future__ import annotations

from pathlib import Path

import pytest

from studio.links.address import TABS, Shape, read_link
from studio.links.lesson import parse_lesson, read_lesson
from studio.server.registry import ModelRegistry
from tests.helpers.studio import link_params

LESSON = Path(__file__).resolve().parents[3] / "studio" / "links" / "lessons" / "attention-is-all-you-need.md"
MODELS = ModelRegistry().names()  # what the shipped checkpoints offer: the lesson names only these


def test_the_shipped_lesson_walks_the_paper_with_links_that_read_cleanly():
    lesson = read_lesson(LESSON)
    assert 12 <= len(lesson.steps) <= 16 and lesson.title
    for step in lesson.steps:
        view = read_link(link_params(step.link), MODELS, lambda name: Shape(4, 4, 4))
        assert view.notices == (), (step.heading, view.notices)
        assert step.notes and "](" not in step.notes.splitlines()[-1]
    assert {read_link(link_params(s.link), MODELS).tab for s in lesson.steps} == set(TABS)  # every tab at least once


@pytest.mark.parametrize("text, message", [
    ("## a\n[x](?tab=model)\n", "no title"),
    ("# T\n", "no steps"),
    ("# T\nhello\n## a\n[x](?tab=model)\n", "line 2: text before the first step"),
    ("# T\n## a\nnotes only\n", "line 2: step 'a' has no link"),
    ("# T\n## a\n[x](?tab=model)\n?tab=train\n", "line 2: step 'a' has 2 links (lines 3, 4)"),
])
def test_a_malformed_lesson_is_refused_with_its_line(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_lesson(text)
