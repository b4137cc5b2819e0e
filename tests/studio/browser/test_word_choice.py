"""The Word choice tab in headless Chromium (issue 62), with the shipped German→English model: it opens, without a
click, on where each word of "Zwei Hunde spielen im Schnee." is decided, where the reference "Two dogs are playing
in the snow." and the model part, and why "dogs" and not "cat"; another token's contrast takes the runner-up; a
link opens the contrast it names; calibration on Multi30k where the shared data holds it; a phone's layout.
Screenshots go to a temporary folder (paths printed)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.conftest import MULTI30K
from tests.helpers.browser import CHROMIUM, MODEL, shown, wait_until_ready, watched_page

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_word_choice_opens_on_where_dogs_is_decided(studio):
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(tempfile.mkdtemp(prefix="studio-word-choice-shots-"))
    outside, errors = [], []
    with sync_api.sync_playwright() as p:
        browser, page = watched_page(p, outside, errors, 1280, 900)
        page.goto(f"{studio}?model={MODEL}")
        wait_until_ready(page)
        page.get_by_role("tab", name="Word choice").click()
        shown(page, "#word-decided", "Where each word is decided", 60_000)
        assert "␣dogs: layer 3" in page.locator("#word-decided").inner_text()
        shown(page, "#word-exposure", "They part at token 3:", 40_000)
        assert "the model wrote ␣play" in page.locator("#word-exposure").inner_text()
        shown(page, "#word-contrast", "At token 2: p(␣dogs)", 40_000)
        plots = page.locator("#tab-word-choice .js-plotly-plot")
        plots.nth(2).wait_for(state="visible", timeout=20_000)
        lens = plots.first
        assert lens.evaluate("(gd) => gd._fullData[0].z.length") == 3  # one row per decoder layer
        page.screenshot(path=shots / "1-first-view.png", full_page=True)

        page.locator("#word-position").click()
        page.get_by_role("option", name="1: ␣Two").click()
        shown(page, "#word-contrast", "At token 1: p(␣Two)", 40_000)
        assert page.locator("#word-foil textarea, #word-foil input").first.input_value() not in ("", "cat")
        if (MULTI30K / "val.de.gz").exists():
            page.get_by_role("spinbutton", name="first N sentences").fill("30")
            page.get_by_role("spinbutton", name="first N sentences").press("Enter")
            page.get_by_role("button", name="Measure").click()
            shown(page, "#word-calibration", "ECE", 60_000)
            plots.nth(3).wait_for(state="visible", timeout=20_000)
        page.screenshot(path=shots / "2-contrast-and-calibration.png", full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_function("[...document.querySelectorAll('#tab-word-choice .js-plotly-plot')].every("
                               "(gd) => gd.layout.studioWas === undefined || gd.layout.studioWas.narrow !== undefined)",
                               timeout=10_000)
        assert page.evaluate("document.documentElement.scrollWidth <= 390 + 1")
        page.screenshot(path=shots / "3-phone.png", full_page=True)
        browser.close()
    print("screenshots:", *sorted(str(p) for p in shots.iterdir()), sep="\n  ")
    assert not outside, f"requests to non-local addresses: {outside}"
    assert not errors, f"console errors: {errors}"


@pytest.mark.slow  # 13 s; test_links.py's word-choice link (CI's set) opens the tab from a link too
def test_a_link_opens_the_contrast_it_names(studio):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        outside, errors = [], []
        browser, page = watched_page(p, outside, errors, 1280, 900)
        page.goto(f"{studio}?tab=word-choice&model={MODEL}&source=Zwei+Hunde+spielen+im+Schnee.&query=1&foil=A")
        shown(page, "#word-contrast", "At token 1: p(␣Two)", 120_000)
        assert "p(␣A)" in page.locator("#word-contrast").inner_text()
        assert page.locator("#word-reference textarea, #word-reference input").first.input_value() == ""
        browser.close()
    assert not errors, f"console errors: {errors}"
