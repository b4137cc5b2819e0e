"""Controls in headless Chromium (issue 51, item 5): What if keeps what a student types while it scores, a click
shows on its button at once, every control has an accessible name, and What if's table fits a phone."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.helpers.browser import MODEL, SENTENCE, shown, wait_until_ready

pytestmark = [pytest.mark.browser]
TABS = ["Translate", "What if", "Beam search", "Attention", "Attention arithmetic", "Saliency", "Positional encoding",
        "Model", "Compare", "Train"]
# The accessible name a control is read out by, as a screen reader computes it in the common cases; generic
# names ("Radio", "Textbox") are Gradio's defaults for a component without a label.
UNNAMED = """() => {
  const nameOf = (e) => {
    if (e.getAttribute('aria-label')) return e.getAttribute('aria-label');
    const by = e.getAttribute('aria-labelledby');
    if (by) return by.split(' ').map((id) => document.getElementById(id)?.textContent || '').join(' ').trim();
    if (e.labels && e.labels.length) return [...e.labels].map((l) => l.textContent).join(' ').trim();
    if (e.tagName === 'BUTTON') return e.textContent.trim() || e.title;
    return e.title || '';
  };
  const shown = (e) => e.getClientRects().length > 0 && !e.closest('details:not([open])');
  return [...document.querySelectorAll('input, button, select, textarea, fieldset')]
    .filter((e) => shown(e) && e.type !== 'hidden')
    .map((e) => [e.outerHTML.slice(0, 100), nameOf(e)])
    .filter(([, name]) => !name || /^(radio|checkbox|textbox|number|slider|dropdown|button)$/i.test(name.trim()));
}"""


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_what_if_keeps_what_is_typed_while_it_scores(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{studio}?model={MODEL}&source={quote(SENTENCE)}")
    page.locator("#tab-translate .js-plotly-plot .bars").first.wait_for(timeout=40_000)
    page.get_by_role("tab", name="What if", exact=True).click()
    shown(page, "#tab-what-if", SENTENCE)  # the boxes are filled before the scoring starts...
    target = page.get_by_label("Target: a translation, or its beginning")
    target.fill("Two cats")  # ...so this, typed while it scores, stays
    page.locator("#what-if-tokens .token-chip").first.wait_for(timeout=40_000)
    page.wait_for_function("() => !document.querySelector('#tab-what-if .pending')", timeout=40_000)
    assert target.input_value() == "Two cats"
    page.close()


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_a_click_shows_on_its_button_at_once(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(studio)
    wait_until_ready(page)
    button = page.locator("#tab-translate button", has_text="Translate").first
    # Read in the same task as the click: the mark is set by the click itself, before any answer can come.
    busy = button.evaluate("(b) => { b.click(); return b.getAttribute('aria-busy'); }")
    assert busy == "true"
    page.close()


def test_every_control_on_every_tab_has_a_name(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(studio)
    wait_until_ready(page)
    unnamed = {}
    for tab in TABS:
        page.get_by_role("tab", name=tab, exact=True).click()
        page.get_by_role("tab", name=tab, exact=True).and_(page.locator("[aria-selected=true]")).wait_for()
        unnamed.update({f"{tab}: {html}": name for html, name in page.evaluate(UNNAMED)})
    assert unnamed == {}
    page.close()


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_the_what_if_table_fits_a_phone(studio, browser):
    page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page.goto(f"{studio}?tab=what-if&model={MODEL}&source={quote(SENTENCE)}")
    table = page.locator("#what-if-totals table")
    table.wait_for(timeout=40_000)
    widths = table.evaluate("(t) => [t.getBoundingClientRect().right, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] + 1, widths
    page.close()
