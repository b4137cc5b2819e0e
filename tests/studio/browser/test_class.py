"""A class in headless Chromium (issue 64): one lecturer's page and two students' phones. The lecturer starts a
class from the Lesson panel; the students open its link and follow each step; they answer the step's question,
the lecturer's page counts them, and Reveal shows the model's answer on every page. A student who steps away
stays where they are until "Follow the lecturer"."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from studio.links.address import read_link
from studio.links.lesson import read_lesson
from studio.links.lesson_panel import lesson_link
from studio.links.questions import asked
from studio.server.registry import ModelRegistry
from tests.helpers.browser import CHROMIUM, launch_chromium, served_studio, shown
from tests.helpers.studio import link_params

LESSON = """# Numbers, with questions

## Translate a number
The model writes German number words.
[Open](?model=numbers-en-de-tiny&source=twenty+-+one)

## Which one does it keep?
Four hypotheses finish; one is kept.
Ask choice: Which translation will beam search keep?
[Open](?tab=beam-search&model=numbers-en-de-tiny&source=twenty+-+one&beam=4)

## Where it looked
Ask token "zwanzig": Writing "zwanzig", which English word does the decoder look at most?
[Open](?tab=attention&model=numbers-en-de-tiny&source=twenty+-+one&stack=cross)
"""
SHOTS = os.environ.get("STUDIO_SCREENSHOTS")  # a folder: the pages are saved there as they go, to look at

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


@pytest.fixture(scope="module")
def lesson_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lesson") / "numbers.md"
    path.write_text(LESSON, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def studio(lesson_file):
    with served_studio("--lesson", str(lesson_file), "--public") as url:
        yield url


def snap(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


def on_step(page, step: int) -> None:
    """Until the page shows the lesson's step (its address, then its class box's heading)."""
    page.wait_for_url(f"**lesson={step}**", timeout=40_000)
    page.wait_for_function("() => document.documentElement.dataset.studioScripts === 'ready'", timeout=40_000)


@pytest.mark.slow  # three pages through a lesson: minutes on 2 cores (test_class_panel.py covers the routes)
def test_students_follow_the_lecturer_answer_and_see_the_reveal(studio, lesson_file):
    sync_api = pytest.importorskip("playwright.sync_api")
    lesson = read_lesson(lesson_file)
    registry = ModelRegistry()
    view = read_link(link_params(lesson.steps[1].link), registry.names())
    expected = asked(registry.get(view.model), lesson.steps[1].question, view)  # what the model answers
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        lecturer = browser.new_page(viewport={"width": 1280, "height": 900})
        lecturer.goto(studio + lesson_link(lesson, 0))
        start = lecturer.locator("#lesson-class-start")
        start.wait_for(timeout=40_000)
        start.click()
        shown(lecturer, "#class-heading", "Students open")
        lecturer.wait_for_function("() => window.location.hash.includes('key=')", timeout=20_000)  # Start's last step
        assert "key=" in lecturer.url and "class=" in lecturer.url  # the key stays with this page only
        link = lecturer.locator("#class-heading code").inner_text()
        lecturer.locator("#class-qr-image img").wait_for(timeout=20_000)
        start.wait_for(state="hidden", timeout=20_000)  # one class a page
        snap(lecturer, "lecturer-started")

        students = [browser.new_page(viewport={"width": 390, "height": 844}) for _ in range(2)]
        for student in students:
            student.goto(link)
            on_step(student, 1)
            shown(student, "#class-follow", "Following the lecturer: step 1 of 3")
            assert "key=" not in student.url
        snap(students[0], "student-following")

        for student in students:  # gone if the page were loaded again
            student.evaluate("() => { window.stillThisPage = true; }")
        lecturer.locator("#lesson-next").click()  # the page moves, and the class with it
        on_step(lecturer, 2)
        shown(lecturer, "#class-question", "Which translation will beam search keep?")
        for student in students:
            on_step(student, 2)
            shown(student, "#class-question", "Which translation will beam search keep?")
            student.get_by_role("tab", name="Beam search", selected=True).wait_for(timeout=40_000)  # the step's view
            assert student.evaluate("() => window.stillThisPage === true")  # followed in place
        wrong = next(option for option in expected.options if option != expected.answer)
        picks = [expected.answer, wrong]
        for student, pick in zip(students, picks):
            student.locator("#class-choice").get_by_label(pick, exact=True).check()
            student.locator("#class-send").click()
            shown(student, "#class-said", "Your answer is in")
        snap(students[0], "student-answered")
        shown(lecturer, "#class-answers", "The room's answers: 2 pages")  # counted as they came, each once
        snap(lecturer, "lecturer-counts")

        lecturer.locator("#class-reveal").click()
        for page in [lecturer, *students]:
            shown(page, "#class-result", f"The model: {expected.answer}")
            shown(page, "#class-result", f"1 of 2 (50%) said {expected.answer}")
        for student, pick in zip(students, picks):
            shown(student, "#class-said", f"Your answer: {pick}")
        snap(lecturer, "lecturer-revealed")
        snap(students[1], "student-revealed")

        away, following = students
        away.get_by_role("tab", name="Attention", exact=True).click()  # exploring: the page stops following
        shown(away, "#class-follow", "You stepped away")
        lecturer.locator("#lesson-next").click()
        on_step(lecturer, 3)
        on_step(following, 3)
        shown(away, "#class-follow", "The lecturer is on step 3 of 3")
        assert "lesson=2" in away.url
        away.locator("#class-follow-button").click()
        on_step(away, 3)
        shown(away, "#class-follow", "Following the lecturer: step 3 of 3")

        lecturer.locator("#class-end").click()
        shown(lecturer, "#class-heading", "has ended")
        lecturer.wait_for_function("() => !window.location.hash.includes('key=')", timeout=20_000)  # key dropped
        shown(away, "#class-follow", "The class has ended")
        browser.close()
