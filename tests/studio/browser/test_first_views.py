"""First views in headless Chromium (issue 51, items 1 and 6): the landing says where to start and shows the model
line in its first render; Compare opens on two models of one language pair (or one against itself, said so);
Attention arithmetic opens on a head that spreads its weight over words, its sliders bounded by the model."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from studio.server.registry import ModelRegistry
from tests.helpers.browser import MODEL, SENTENCE

pytestmark = [pytest.mark.browser]


def test_the_landing_says_where_to_start_and_the_model_line_comes_with_the_first_render(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(studio)
    page.locator("#start-here").wait_for(timeout=40_000)
    assert "Start here" in page.locator("#start-here").inner_text()
    summary = page.locator("#model-summary")
    assert summary.inner_text().strip() and page.locator("#model-summary.pending, #model-summary .pending").count() == 0
    page.close()


def test_compare_opens_on_one_language_pair(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{studio}?tab=compare")
    page.get_by_role("tab", name="Compare", exact=True).and_(page.locator("[aria-selected=true]")).wait_for()
    a, b = (page.locator(f"#compare-model-{side} input").input_value() for side in "ab")
    registry = ModelRegistry()
    assert registry.languages(a) == registry.languages(b), (a, b)
    if a == b:
        page.locator("#tab-compare").get_by_text("Model B is model A itself").wait_for(timeout=20_000)
    page.close()


def test_the_arithmetic_opens_on_words_with_sliders_the_models_size(studio, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{studio}?tab=attention-arithmetic&model={MODEL}&source={quote(SENTENCE)}")
    page.locator("#arithmetic-steps table").wait_for(timeout=40_000)
    ranges = page.locator("#tab-arithmetic input[type=range]")
    assert [ranges.nth(i).get_attribute("max") for i in (0, 1)] == ["3", "4"]  # 3 layers, 4 heads
    # The query's weights: the table's last column, one row per key and a sum; <eos> is not where most of it goes.
    rows = page.locator("#arithmetic-steps tbody tr")
    weights = {rows.nth(i).locator("td").nth(1).inner_text(): float(rows.nth(i).locator("td").nth(5).inner_text())
               for i in range(rows.count() - 1)}
    assert weights.get("<eos>", 0.0) < 0.5 and max(weights.values()) < 0.99, weights
    page.close()
