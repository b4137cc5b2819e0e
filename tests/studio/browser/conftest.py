"""What the browser tests share: the studio served on the repository's own checkpoints (a module serving
another studio defines its own `studio`) and headless Chromium, each once a module."""
from __future__ import annotations

import pytest

from tests.helpers.browser import launch_chromium, served_studio


@pytest.fixture(scope="module")
def studio():
    with served_studio() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = launch_chromium(p)
        yield chromium
        chromium.close()
