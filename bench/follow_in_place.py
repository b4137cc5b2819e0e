"""A student's page following the lecturer in place against one loaded anew (issue 64), side by side in one run.

    python bench/follow_in_place.py [--students 4] [--moves 6]

Starts `python -m studio --public --class` on 127.0.0.1 (the shipped lesson; nothing else is contacted) and opens
--students pages of the class link in headless Chromium (/usr/bin/chromium), a phone's size. Half of them follow as
the studio does (static/class_follow.js opens the step in place: #open-this-address); on the other half that button
is taken away as the page is built, so class_follow.js loads each step's page anew, as it did before. The lecturer
moves the class --moves times (POST /class/CODE/step with its key, as Next does), waiting until every page shows the
step ("Step N of" in the Lesson panel; each page notes when, itself) before the next move. Prints, per way, the
time from the move to the page showing its step (p50, max) and their ratio, with the machine's load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.followers import start_studio  # noqa: E402
from bench.serving import free_port, wait_for  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
# On the pages that load each step anew: the in-place opener removed as soon as Gradio renders it.
WITHOUT_OPENER = """new MutationObserver(() => document.getElementById('open-this-address')?.remove())
    .observe(document, {childList: true, subtree: true});"""
# On every page: when each step first shows (kept in the tab's sessionStorage, which outlives a reload).
SHOWN_AT = """new MutationObserver(() => {
  const shown = (document.querySelector('#lesson-step')?.innerText || '').match(/Step (\\d+) of/);
  if (shown && !sessionStorage.getItem('shown-' + shown[1])) sessionStorage.setItem('shown-' + shown[1], Date.now());
}).observe(document, {childList: true, subtree: true, characterData: true});"""


def move(base: str, code: str, key: str, step: int) -> float:
    body = json.dumps({"key": key, "step": step}).encode()
    request = urllib.request.Request(f"{base}class/{code}/step", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    started = time.time()  # the pages' Date.now() is the same clock
    urllib.request.urlopen(request, timeout=30).close()
    return started


def on_step(page, step: int, timeout_ms: int = 120_000) -> None:
    page.wait_for_function("(n) => (document.querySelector('#lesson-step')?.innerText || '').includes(`Step ${n} of`)",
                           arg=step, timeout=timeout_ms)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=4, help="pages, half of each way (default 4)")
    parser.add_argument("--moves", type=int, default=6, help="the lecturer's moves (default 6)")
    args = parser.parse_args(argv)
    if not 2 <= args.students <= 20 or not 1 <= args.moves <= 30:
        parser.error("keep it bounded: 2-20 students, 1-30 moves")
    from playwright.sync_api import sync_playwright

    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    proc, code, key = start_studio(port)
    seconds: dict[str, list[float]] = {"in place": [], "loaded anew": []}
    try:
        wait_for(base, proc, timeout=120.0)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            pages = []
            for i in range(args.students):
                context = browser.new_context(viewport={"width": 390, "height": 844})
                context.add_init_script(SHOWN_AT)
                way = "in place" if i % 2 == 0 else "loaded anew"
                if way == "loaded anew":
                    context.add_init_script(WITHOUT_OPENER)
                page = context.new_page()
                page.goto(f"{base}class/{code}")
                on_step(page, 1)
                pages.append((way, page))
            for step in range(2, 2 + args.moves):
                started = move(base, code, key, step)
                for way, page in pages:
                    on_step(page, step)
                    shown_at = float(page.evaluate("(n) => sessionStorage.getItem('shown-' + n)", step)) / 1000
                    seconds[way].append(shown_at - started)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    for way, each in seconds.items():
        print(f"{way}: {len(each)} page-steps, move to step shown p50 {statistics.median(each):.2f} s, "
              f"max {max(each):.2f} s")
    ratio = statistics.median(seconds["loaded anew"]) / statistics.median(seconds["in place"])
    print(f"loaded anew / in place (p50): {ratio:.2f}x; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} "
          f"CPUs")


if __name__ == "__main__":
    main()
