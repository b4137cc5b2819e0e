"""A lesson step's question (issue 64, studio/links/questions.py): the Ask line's three forms, refused with its
line when wrong; the model's answers computed from the model; answers checked and counted per option or bin."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from studio.links.address import read_link
from studio.links.lesson import parse_lesson, read_lesson
from studio.links.questions import Asked, Question, asked, checked, labels, parse_ask, position_of, tally
from studio.server.registry import ModelRegistry
from tests.helpers.studio import link_params

LESSON = Path(__file__).resolve().parents[3] / "studio" / "links" / "lessons" / "attention-is-all-you-need.md"


@pytest.mark.parametrize("line, question", [
    ('Ask token "dogs": Writing "dogs", which word?', Question("token", "dogs", 'Writing "dogs", which word?')),
    ("Ask choice: Which translation will beam search keep?",
     Question("choice", None, "Which translation will beam search keep?")),
    ('Ask number "snow": How sure, in percent?', Question("number", "snow", "How sure, in percent?")),
    ("A note that asks nothing", None),
])
def test_the_three_forms_of_an_ask_line(line, question):
    assert parse_ask(line) == question


@pytest.mark.parametrize("line, message", [
    ("Ask tokens: x", "an Ask line is"),
    ('Ask choice "x": Which?', "takes no word"),
    ("Ask number: How sure?", "needs the word"),
    ('Ask token "dogs":', "an Ask line is"),
    ("Ask choice: " + "x" * 301, "an Ask line is"),  # a question is at most 300 characters
])
def test_a_malformed_ask_line_is_refused_with_its_line(line, message):
    with pytest.raises(ValueError, match=message):
        parse_ask(line)
    with pytest.raises(ValueError, match=f"lesson line 3: .*{message}"):
        parse_lesson(f"# T\n## a\n{line}\n[x](?tab=model)\n")


def test_a_step_asks_one_question_and_the_ask_line_is_not_a_note():
    lesson = parse_lesson('# T\n## a\nA note.\nAsk number "snow": How sure?\n[x](?source=Schnee)\n')
    assert lesson.steps[0].question == Question("number", "snow", "How sure?") and lesson.steps[0].notes == "A note."
    with pytest.raises(ValueError, match="line 4: step 'a' asks twice"):
        parse_lesson("# T\n## a\nAsk choice: A?\nAsk choice: B?\n[x](?tab=model)\n")


def test_words_and_tokens_as_the_questions_match_and_show_them():
    assert position_of("snow", ["▁Two", "▁dogs", "▁in", "▁the", "▁snow."]) == 4
    assert position_of("Dog", ["▁Two", "▁dogs"]) == 1  # a word's beginning, without case
    with pytest.raises(ValueError, match="has no word 'cat'"):
        position_of("cat", ["▁Two", "▁dogs"])
    assert labels(["▁the", "▁dog", "▁the", "<eos>"]) == ("the", "dog", "the (2)", "<eos>")


def test_answers_are_checked_and_counted_per_option_or_bin():
    choice = Asked(Question("choice", None, "?"), ("a", "b"), "a", "")
    assert checked(choice, "b") == "b"
    for bad in ("c", None, 3, "<b>a</b>"):
        with pytest.raises(ValueError, match="pick one of the answers shown"):
            checked(choice, bad)
    assert tally(choice, ["a", "b", "a"]) == (("a", "b"), [2, 1])
    number = Asked(Question("number", "snow", "?"), (), 95.9, "")
    assert checked(number, "42.5") == 42.5 and checked(number, 100) == 100.0
    for bad in (-1, 100.1, math.nan, math.inf, "x", None, 10**400):
        with pytest.raises(ValueError, match="a number from 0 to 100"):
            checked(number, bad)
    names, counts = tally(number, [0.0, 9.9, 10.0, 95.9, 100.0])
    assert names[0] == "0–10" and names[-1] == "90–100" and counts == [2, 1, 0, 0, 0, 0, 0, 0, 0, 2]


def test_the_shipped_lessons_three_questions_are_answered_by_the_model():
    registry = ModelRegistry()
    lesson = read_lesson(LESSON)
    questions = [step for step in lesson.steps if step.question is not None]
    assert sorted(step.question.kind for step in questions) == ["choice", "number", "token"]
    for step in questions:
        view = read_link(link_params(step.link), registry.names())
        answer = asked(registry.get(view.model), step.question, view)
        if step.question.kind == "number":
            assert 0 <= answer.answer <= 100 and not answer.options
        else:
            assert answer.answer in answer.options and len(answer.options) >= 2
        assert answer.why
