"""The Knock out tab in headless Chromium (issue 62), with the shipped German→English model: it opens, without a
click, on the positions knocked out of who chases whom and says that the claim holds (A's words reversed translate
alike); another part redraws with its own claim; Link to this view names it; a corpus is scored both ways with a
progress bar; presenter mode and a phone's layout. Screenshots go to a temporary folder (paths printed)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.helpers.browser import CHROMIUM, MODEL, shown, wait_until_ready, watched_page

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


def test_knock_out_opens_on_positions_and_tests_the_claim(studio):
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(tempfile.mkdtemp(prefix="studio-knockout-shots-"))
    outside, errors = [], []
    with sync_api.sync_playwright() as p:
        browser, page = watched_page(p, outside, errors, 1280, 900)  # a projector's width
        page.goto(f"{studio}?model={MODEL}")
        wait_until_ready(page)
        tabs = page.locator(".tab-wrapper, [role=tablist]").first
        assert tabs.evaluate("(t) => t.scrollWidth <= t.clientWidth + 1")  # the tab bar fits: nothing scrolls away
        page.get_by_role("tab", name="Knock out").click()
        shown(page, "#knockout-verdict", "The claim holds on this model.", 60_000)
        assert "Section 3.5:" in page.locator("#knockout-claim").inner_text()
        table = page.locator("#knockout-translations").inner_text()
        assert "A's words reversed" in table and "Two dogs chase a cat." in table
        plots = page.locator("#tab-knockout .js-plotly-plot")
        plots.nth(1).wait_for(state="visible", timeout=20_000)
        assert page.locator("#knockout-where").is_hidden()  # positions sit nowhere in particular
        page.screenshot(path=shots / "1-positions.png", full_page=True)

        page.get_by_text("The 1/√d_k scale (3.2.1)").click()
        shown(page, "#knockout-verdict", "The attention's rows sharpen", 40_000)
        assert "Section 3.2.1:" in page.locator("#knockout-claim").inner_text()
        page.get_by_text("Heads (3.2.2)").click()
        page.locator("#knockout-where").wait_for(state="visible", timeout=20_000)
        shown(page, "#knockout-claim", "Section 3.2.2:", 40_000)
        shown(page, "#knockout-why-this-map", "Why this map", 40_000)
        page.get_by_role("button", name="Link to this view").click()
        page.wait_for_function("document.querySelector('#link-address textarea, #link-address input').value"
                               ".includes('tab=knock-out')", timeout=20_000)
        address = page.locator("#link-address textarea, #link-address input").first.input_value()
        assert "part=heads" in address and "where=cross.2" in address and f"model={MODEL}" in address
        page.screenshot(path=shots / "2-heads.png", full_page=True)

        page.get_by_text("On a corpus: BLEU and chrF before and after").click()
        page.get_by_role("spinbutton", name="first N sentences").fill("20")
        page.get_by_role("spinbutton", name="first N sentences").press("Enter")
        page.get_by_role("button", name="Translate them both ways").click()
        shown(page, "#knockout-corpus-notes", "translations changed", 60_000)
        plots.nth(2).wait_for(state="visible", timeout=20_000)
        page.screenshot(path=shots / "3-corpus.png", full_page=True)

        page.get_by_label("Presenter mode (large type, high contrast)").check()
        page.locator("body.presenter").wait_for(timeout=10_000)
        page.screenshot(path=shots / "4-presenter.png", full_page=True)
        page.get_by_label("Presenter mode (large type, high contrast)").uncheck()
        page.set_viewport_size({"width": 390, "height": 844})  # a phone: the maps one above the other
        page.wait_for_function("[...document.querySelectorAll('#tab-knockout .js-plotly-plot')].every("
                               "(gd) => gd.layout.studioWas === undefined || gd.layout.studioWas.narrow !== undefined)",
                               timeout=10_000)
        assert page.evaluate("document.documentElement.scrollWidth <= 390 + 1")  # nothing wider than the phone
        # Every tab in sight, the bar wrapped onto lines of its own (none behind a "⋯" menu).
        assert page.evaluate("[...document.querySelectorAll('[role=tab]')].filter((t) => t.id.startsWith('tab-') "
                             "|| t.closest('.tab-wrapper')).every((t) => { const r = t.getBoundingClientRect(); "
                             "return r.width > 0 && r.right <= 391; })")
        for name in ("Knock out", "Word choice", "Train"):
            assert page.get_by_role("tab", name=name).is_visible()
        page.screenshot(path=shots / "5-phone.png", full_page=True)
        browser.close()
    print("screenshots:", *sorted(str(p) for p in shots.iterdir()), sep="\n  ")
    assert not outside, f"requests to non-local addresses: {outside}"
    assert not errors, f"console errors: {errors}"


@pytest.mark.slow  # 10 s; test_links.py's knock-out link (CI's set) opens the tab from a link too
def test_a_link_opens_the_knock_out_it_names(studio):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        outside, errors = [], []
        browser, page = watched_page(p, outside, errors, 1280, 900)
        page.goto(f"{studio}?tab=knock-out&model={MODEL}&source=Ein+Hund+rennt+durch+den+Schnee."
                  "&part=hide_source_token&where=1")
        shown(page, "#knockout-claim", "Section 3.2.3:", 120_000)
        shown(page, "#knockout-verdict", "No decoder position may look at", 60_000)
        assert "A dog" in page.locator("#knockout-translations").inner_text()
        browser.close()
    assert not errors, f"console errors: {errors}"
