"""What the browser tests share: the studio served on a free port for a module's tests, headless Chromium with a
page that records requests off this machine and console errors, waiting for what a page shows, and the shipped
German model with the sentence the tests open it on."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

from bench.serving import free_port, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
LOCAL = {"127.0.0.1", "localhost"}
ROOT = Path(__file__).resolve().parents[2]
MODEL = "multi30k-de-en-small"  # shipped: the repository's own checkpoints/
SENTENCE = "Zwei Hunde spielen im Schnee."


@contextlib.contextmanager
def served_studio(*options: str) -> Iterator[str]:
    """`python -m studio --port PORT *options` until the block ends; its address."""
    port = free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "studio", "--port", str(port), *options], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        print(f"studio answered after {wait_for(url, proc, timeout=120.0):.1f} s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def launch_chromium(p):
    """Headless Chromium from a sync_playwright() context p."""
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def watched_page(p, outside: list[str], errors: list[str], width: int = 1400, height: int = 1000):
    """Headless Chromium and a page that records non-local requests (into outside) and console errors."""
    browser = launch_chromium(p)
    page = browser.new_page(viewport={"width": width, "height": height})

    def request(req) -> None:
        host = urlparse(req.url).hostname
        if req.url.split(":")[0] not in ("data", "blob", "about") and host not in LOCAL:
            outside.append(req.url)

    page.on("request", request)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return browser, page


def wait_until_ready(page, timeout: float = 40_000) -> None:
    """Until the studio's page scripts have run (a click is then marked at once) and the page's load events
    have filled the Translate tab's examples (a placeholder example has no text, so no accessible name)."""
    page.wait_for_function("() => document.documentElement.dataset.studioScripts === 'ready'", timeout=timeout)
    page.wait_for_function("() => [...document.querySelectorAll('#translate-examples .gallery-item')]"
                           ".some((b) => b.textContent.trim())", timeout=timeout)


def shown(page, selector: str, text: str, timeout_ms: int = 40_000) -> None:
    """Wait until an element under selector shows text (in its text or its boxes' values)."""
    page.wait_for_function(
        """([selector, text]) => [...document.querySelectorAll(selector)].some(root =>
               root.innerText.includes(text) ||
               [...root.querySelectorAll('textarea, input')].some(box => (box.value || '').includes(text)))""",
        arg=[selector, text], timeout=timeout_ms)
