"""Numbers readable on a projector (issue 51), in headless Chromium at a projector's 1280x720 in presenter mode:
the Attention tab's grid names the tokens on its axes, its Download menu's CSV and JSON carry every token (<eos>
included) and the axis titles, and every heat strip of the Attention arithmetic tab has its colour bar, the short
ones their numbers. Screenshots go to a temporary folder (paths printed): look at them as a class would."""
from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import pytest

from core.checkpoint import save_checkpoint
from tests.helpers.browser import CHROMIUM, served_studio, watched_page
from tests.helpers.studio import SENTENCES, studio_bundle

HEADER = ["trace", "x", "x_label", "y", "y_label", "value", "text", "x_title", "y_title", "value_title"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    folder = tmp_path_factory.mktemp("checkpoints")
    save_checkpoint(folder / "studio-tiny", studio_bundle())
    with served_studio("--checkpoints-dir", str(folder), "--no-lesson") as url:
        yield url


def _download(page, plot_label: str, kind: str) -> str:
    """The text of a plot's Download menu item kind ("CSV", "JSON"), the plot found by its label."""
    menu = page.locator(f'summary[aria-label="Download: {plot_label}"]')
    menu.click()
    with page.expect_download() as got:
        menu.locator("xpath=..").locator(".studio-download-menu button", has_text=kind).click()
    assert got.value.suggested_filename.endswith("." + kind.lower())
    return Path(got.value.path()).read_text(encoding="utf-8")


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_a_class_reads_the_grid_and_the_arithmetic_on_a_projector(studio):
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(tempfile.mkdtemp(prefix="studio-projector-shots-"))
    outside, errors = [], []
    with sync_api.sync_playwright() as p:
        browser, page = watched_page(p, outside, errors, 1280, 720)  # a projector's size
        page.goto(studio)
        page.get_by_text("studio-tiny ·").first.wait_for(timeout=20000)
        page.get_by_label("Presenter mode (large type, high contrast)").check()
        page.locator("#tab-translate").get_by_text(SENTENCES[0], exact=True).click()
        page.locator("#tab-translate .js-plotly-plot .bars").first.wait_for(timeout=20000)

        # The Attention tab's grid: the tokens on its axes, <eos> drawn (not read as a tag), each head and layer named.
        page.get_by_role("tab", name="Attention", exact=True).click()
        grid = page.locator("#tab-attention .js-plotly-plot").first
        grid.locator(".heatmaplayer").wait_for(timeout=20000)
        page.wait_for_function("document.querySelector('#tab-attention .js-plotly-plot')._fullLayout.font.size > 14",
                               timeout=5000)  # presenter mode's type
        xticks = grid.locator(".xtick text").all_text_contents()
        assert xticks.count("<eos>") == 4 and xticks.count("Hund") == 4  # under each of the 4 heads
        assert grid.locator(".ytick text").count() >= 2 * 2  # the queries beside both layers
        notes = grid.locator(".annotation-text").all_text_contents()
        assert {"H1", "H4", "layer 1", "layer 2"} <= set(notes)
        grid.scroll_into_view_if_needed()
        grid.screenshot(path=shots / "1-attention-grid.png")
        page.screenshot(path=shots / "2-attention-page.png")
        titles = grid.evaluate("(gd) => [gd.layout.xaxis.title.text, gd.layout.yaxis.title.text]")
        assert all(titles)

        # Its numbers as CSV: a row per weight, each naming its key and query (every token: <eos> too), the axes'
        # titles and what the value is.
        table = list(csv.reader(io.StringIO(_download(page, "Every layer and head", "CSV"))))
        assert table[0] == HEADER
        rows = [dict(zip(HEADER, row)) for row in table[1:]]
        plain = [t.replace("<br>", " ") for t in titles]  # a line break in a title is a space in a CSV cell
        assert rows and all(r["x_title"] == plain[0] and r["y_title"] == plain[1] for r in rows)
        assert all(r["value_title"] == "weight" for r in rows)
        assert "<eos>" in {r["x_label"] for r in rows} and "<eos>" in {r["y_label"] for r in rows}
        assert "Hund" in {r["x_label"] for r in rows}
        # The hover note ("L1 H1: query → key") names the same tokens: every row's labels are its own.
        assert all(r["text"].endswith(f": {r['y_label']} → {r['x_label']}") for r in rows)
        # ... and as JSON: the axes' titles and every token by position.
        numbers = json.loads(_download(page, "Every layer and head", "JSON"))
        assert numbers["axes"]["xaxis"]["title"] == plain[0] and numbers["axes"]["yaxis"]["title"] == plain[1]
        assert "<eos>" in numbers["axes"]["xaxis"]["tick_labels"].values()
        assert numbers["traces"][0]["value_title"] == "weight"

        # Attention arithmetic: each of its three plots has a colour bar for each scale (two each), the softmax
        # weights printed in their cells.
        page.get_by_role("tab", name="Attention arithmetic").click()
        page.locator("#arithmetic-steps table").wait_for(timeout=20000)
        plots = page.locator("#tab-arithmetic .js-plotly-plot")
        plots.nth(2).locator(".colorbar").first.wait_for(timeout=20000)
        assert [plots.nth(i).locator(".colorbar").count() for i in range(3)] == [2, 2, 2]
        for i in range(3):  # every heat strip on a colour axis, each axis's bar drawn
            assert plots.nth(i).evaluate("(gd) => gd._fullData.every((t) => t.coloraxis && "
                                         "gd._fullLayout[t.coloraxis].showscale)")
        weights = plots.nth(1).evaluate("(gd) => Array.from(gd._fullData[0].z[0])")
        printed = plots.nth(1).locator(".heatmaplayer text").all_text_contents()
        assert printed[:len(weights)] == [f"{w:.2f}" for w in weights]
        bar_titles = plots.nth(1).locator(".colorbar .cbtitle").all_text_contents()
        assert "weight" in bar_titles
        for i in range(3):
            plots.nth(i).scroll_into_view_if_needed()
            plots.nth(i).screenshot(path=shots / f"{i + 3}-arithmetic-{i + 1}.png")
        page.screenshot(path=shots / "6-arithmetic-page.png")
        browser.close()
    print("screenshots:", *sorted(str(p) for p in shots.iterdir()), sep="\n  ")
    assert not outside, f"requests to non-local addresses: {outside}"
    assert not errors, f"console errors: {errors}"
