"""Deep links in headless Chromium (issue 53): a fresh page opened on a view's address selects that tab and shows
the sentence there, already computed; "Link to this view" gives an address that reopens the same view; what a
link gets wrong is said on the page, never a traceback."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.helpers.browser import CHROMIUM, MODEL, SENTENCE, shown

# Each tab by its slug: its label, its element, what it draws once computed (None: nothing for a sentence).
TABS = {"translate": ("Translate", "#tab-translate", "#tab-translate .js-plotly-plot .bars"),
        "what-if": ("What if", "#tab-what-if", "#what-if-tokens span"),
        "beam-search": ("Beam search", "#tab-beam", "#beam-tree .js-plotly-plot .scatterlayer"),
        "attention": ("Attention", "#tab-attention", "#tab-attention .js-plotly-plot .heatmaplayer"),
        "attention-arithmetic": ("Attention arithmetic", "#tab-arithmetic", "#arithmetic-steps table"),
        "saliency": ("Saliency", "#tab-saliency", "#tab-saliency .js-plotly-plot .main-svg"),
        "positional-encoding": ("Positional encoding", "#tab-positional", None),
        "model": ("Model", "#tab-model", None),
        "compare": ("Compare", "#tab-compare", None),
        "train": ("Train", "#tab-train", None),
        "knock-out": ("Knock out", "#tab-knockout", "#tab-knockout .js-plotly-plot .main-svg"),
        "word-choice": ("Word choice", "#tab-word-choice", "#tab-word-choice .js-plotly-plot .main-svg")}
pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


# Three tabs in CI (the plain one and the two with views of their own); every tab with --runslow.
@pytest.mark.parametrize("slug", [slug if slug in ("translate", "knock-out", "word-choice")
                                  else pytest.param(slug, marks=pytest.mark.slow) for slug in TABS])
def test_a_link_opens_its_tab_with_the_sentence_computed(studio, browser, slug):
    tab, there, drawn = TABS[slug]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{studio}?tab={slug}&model={MODEL}&source={quote(SENTENCE)}")
    page.get_by_role("tab", name=tab, exact=True).and_(page.locator("[aria-selected=true]")).wait_for(timeout=40_000)
    if drawn:
        shown(page, there, SENTENCE)
        page.locator(drawn).first.wait_for(timeout=40_000)  # drawn without a click
    assert errors == [] and page.locator("#link-notices").inner_text().strip() == ""
    page.close()


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_a_link_sets_the_arithmetic_query_and_the_decoding(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{studio}?tab=attention-arithmetic&model={MODEL}&source={quote(SENTENCE)}&stack=cross&layer=2&head=2"
              f"&query=3&method=greedy")
    page.locator("#arithmetic-steps table").wait_for(timeout=40_000)
    assert page.locator("#arithmetic-query input").input_value().startswith("3 ·")
    layer, head = (page.locator("#tab-arithmetic input[type=number]").nth(i).input_value() for i in (0, 1))
    assert (layer, head) == ("2", "2")
    address = copied_link(page)
    assert "query=3" in address and "method=greedy" in address and "layer=2" in address
    page.get_by_role("tab", name="Translate", exact=True).click()
    assert page.get_by_role("radio", name="greedy").is_checked()
    page.close()


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_a_beam_search_link_sets_its_boxes_and_its_copy_names_the_step(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{studio}?tab=beam-search&model={MODEL}&source={quote(SENTENCE)}&step=3&beam=2&alpha=0.8")
    shown(page, "#tab-beam", SENTENCE)
    page.wait_for_function("() => [...document.querySelectorAll('#tab-beam input[type=number]')]"
                           ".some(box => box.value === '0.8')", timeout=40_000)  # the alpha slider's box
    page.locator("#beam-tree .js-plotly-plot .scatterlayer").first.wait_for(timeout=40_000)  # the search, stepped
    address = copied_link(page)
    assert "tab=beam-search" in address and "step=3" in address and "beam=2" in address and "alpha=0.8" in address
    page.close()


def copied_link(page) -> str:
    """The address "Link to this view" gives."""
    page.locator("#link-copy").click()
    page.wait_for_function("() => (document.querySelector('#link-address textarea, #link-address input') || {})"
                           ".value?.startsWith('http')", timeout=20_000)
    return page.locator("#link-address textarea, #link-address input").first.input_value()


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_a_copied_link_reopens_the_same_view_and_a_bad_value_is_said(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{studio}?tab=attention&model={MODEL}&source={quote(SENTENCE)}&stack=cross&layer=2&head=9&colour=red")
    shown(page, "#tab-attention", SENTENCE)
    notices = page.locator("#link-notices")
    notices.get_by_text("head 9 clamped to 4").wait_for(timeout=40_000)
    assert "ignored colour='red'" in notices.inner_text()
    address = copied_link(page)
    assert "tab=attention" in address and "layer=2" in address and "head=4" in address and "stack=cross" in address
    again = browser.new_page(viewport={"width": 1280, "height": 900})
    again.goto(address)
    shown(again, "#tab-attention", SENTENCE)
    assert again.get_by_label("head (large view)").first.input_value() == "4"
    assert again.locator("#link-notices").inner_text().strip() == ""  # a link written here reads back clean
    page.close()
    again.close()
