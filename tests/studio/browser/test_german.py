"""Issue 61 in headless Chromium: the studio opens on the general German<->English model (no picking), a German
sentence typed into Translate comes out in English, and the same model's other direction, picked from the
default picker, turns English into German. Screenshots go to a temporary folder (paths printed)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.helpers.browser import CHROMIUM, wait_until_ready, watched_page

ROOT = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
              pytest.mark.skipif(not (ROOT / "checkpoints" / "tatoeba-de-en").exists(),
                                 reason="tatoeba-de-en is not shipped here")]


def translated(page, sentence: str, shots: Path, name: str) -> str:
    """The Translate tab's translation of sentence, typed and sent with Enter."""
    box = page.get_by_role("textbox", name="Source sentence")
    answer = page.get_by_role("textbox", name="Translation", exact=True)
    before = answer.input_value()
    box.fill(sentence)
    box.press("Enter")
    page.wait_for_function("([before]) => { const t = document.querySelector('#tab-translate .readout textarea'); "
                           "return t && t.value && t.value !== before; }", arg=[before], timeout=60_000)
    page.screenshot(path=shots / name, full_page=True)
    return answer.input_value()


def test_german_typed_on_the_default_model_comes_out_english_and_back(studio):
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(tempfile.mkdtemp(prefix="studio-german-shots-"))
    outside, errors = [], []
    with sync_api.sync_playwright() as p:
        browser, page = watched_page(p, outside, errors, 1280, 900)
        page.goto(studio)
        wait_until_ready(page)
        picker = page.get_by_label("Model", exact=True)
        assert picker.input_value() == "tatoeba-de-en"  # the default, no click
        assert "Tatoeba's everyday sentences" in page.locator("body").inner_text()
        english = translated(page, "Wo ist der Bahnhof?", shots, "1-de-en.png")
        assert "station" in english.lower(), english
        picker.click()
        page.get_by_role("option", name="tatoeba-en-de").click()
        page.wait_for_function("() => document.body.innerText.includes('tatoeba-en-de ·')", timeout=30_000)
        german = translated(page, "My sister likes to read books.", shots, "2-en-de.png")
        assert any(word in german for word in ("Schwester", "Bücher")), german
        browser.close()
    print("screenshots:", *sorted(str(p) for p in shots.iterdir()), sep="\n  ")
    assert not outside, f"requests to non-local addresses: {outside}"
    assert not errors, f"console errors: {errors}"
