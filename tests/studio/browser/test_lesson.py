"""The Lesson panel in headless Chromium (issue 53): `python -m studio --lesson FILE` presents a lecturer's own
lesson; a page opened on a step shows its notes, Next opens the next step's view, and in presenter mode a
clicker's Page Down does too."""
from __future__ import annotations

from pathlib import Path

import pytest

from studio.links.lesson import read_lesson
from studio.links.lesson_panel import lesson_link
from tests.helpers.browser import CHROMIUM, launch_chromium, served_studio

LESSON = """# Numbers, three views

## Translate a number
The model writes German number words.
[Open](?model=numbers-en-de-tiny&source=twenty+-+one)

## Where it looked
Units before tens: the cross-attention crosses.
[Open](?tab=attention&model=numbers-en-de-tiny&source=twenty+-+one&stack=cross)

## The positions
Sines and cosines of many wavelengths.
[Open](?tab=positional-encoding)
"""

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


@pytest.fixture(scope="module")
def lesson_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lesson") / "numbers.md"
    path.write_text(LESSON, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def studio(lesson_file):
    with served_studio("--lesson", str(lesson_file)) as url:
        yield url


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_next_and_a_clickers_page_down_move_the_page_through_the_lesson(studio, lesson_file):
    sync_api = pytest.importorskip("playwright.sync_api")
    lesson = read_lesson(lesson_file)
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(studio + lesson_link(lesson, 0))
        page.locator("#lesson-step").get_by_text("Step 1 of 3: Translate a number").wait_for(timeout=40_000)
        assert "German number words" in page.locator("#lesson-notes").inner_text()
        page.locator("#lesson-next").click()
        page.wait_for_url("**lesson=2**", timeout=20_000)
        page.locator("#lesson-step").get_by_text("Step 2 of 3: Where it looked").wait_for(timeout=40_000)
        page.get_by_role("tab", name="Attention", exact=True).and_(
            page.locator("[aria-selected=true]")).wait_for(timeout=20_000)
        page.locator("#tab-attention .js-plotly-plot .heatmaplayer").first.wait_for(timeout=40_000)
        page.get_by_label("Presenter mode (large type, high contrast)").check()
        page.locator("body.presenter").wait_for(timeout=10_000)
        page.locator("#lesson-step").click()  # the keys belong to the page, not to a text box
        page.keyboard.press("PageDown")
        page.wait_for_url("**lesson=3**", timeout=20_000)
        assert "presenter=1" in page.url  # the next step keeps presenter mode
        page.locator("#lesson-step").get_by_text("Step 3 of 3: The positions").wait_for(timeout=40_000)
        page.locator("body.presenter").wait_for(timeout=20_000)
        assert page.locator("#lesson-next").is_disabled()
        browser.close()
