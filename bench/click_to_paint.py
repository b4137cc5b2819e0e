"""One translation on the Translate tab, from the key press to the painted plot (issue 54, item 1): where a
click's time goes, in the server and in the page, and which other events the click sets off.

    python bench/click_to_paint.py                     # 12 clicks, the shipped multi30k-de-en-small
    python bench/click_to_paint.py --clicks 30 --threads 1

The studio runs in this process (its own command line, `python -m studio`, with timers around its parts), and
headless Chromium types a sentence and presses Enter, as a student does. Every stage is timed on the wall
clock both sides share (this machine's), so that the stages add up to what the student waits:

    the press -> the translate callback starts         the page, the queue, Gradio's preprocessing
    decoding                                           studio.server.batching.translate (core.translate, batched)
    the probability figure                             studio.plots.token_probabilities_json
    the rest of the callback                           n-best table, notices
    Gradio's postprocessing                            components' values -> JSON-ready data (the figure's JSON)
    -> the translation text shows                      the answer's serialization, the event stream, the page
    -> the probability plot is painted                 plotly's render in the page

Beside the stages: every event the press set off (Gradio functions that ran), their server time, and the
size of the answer's JSON. Needs Chromium (/usr/bin/chromium) and the playwright package.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
import traceback
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from bench.serving import free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
SENTENCES = ["Ein Hund läuft im Park.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch.",
             "Ein Kind isst ein Eis.", "Drei Mädchen tanzen auf der Straße.", "Ein Mann fährt Fahrrad."]

# Server-side marks, (name, wall-clock seconds since the epoch): filled by the timers below.
MARKS: list[tuple[str, float]] = []
EVENTS: list[tuple[str, float, float]] = []  # (function, start, end) of every event Gradio processed
ANSWER_BYTES: list[int] = []
LONG_TASKS = "   of which the page's long tasks"


def mark(name: str) -> None:
    MARKS.append((name, time.time()))


def timed(function, before: str, after: str):
    def wrapper(*args, **kwargs):
        mark(before)
        try:
            return function(*args, **kwargs)
        finally:
            mark(after)
    return wrapper


def event_name(app, block_fn) -> str:
    """An event's API name, else what set it off ("State.change", "Translation.change"): the studio wraps most
    functions in one guard, so their own names say little."""
    if getattr(block_fn, "api_name", None) == "translate":
        return "translate"
    triggers = []
    for block_id, event in block_fn.targets:
        block = app.blocks.get(block_id)
        label = getattr(block, "label", None) or getattr(block, "elem_id", None) or type(block).__name__
        triggers.append(f"{label}.{event}")
    fn = block_fn.fn
    while hasattr(fn, "__wrapped__") or hasattr(fn, "func"):
        fn = getattr(fn, "__wrapped__", None) or fn.func
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', 'fn')} <- {', '.join(triggers) or 'then'}"


def install_timers() -> None:
    """Timers around the translate callback's parts and around Gradio's processing of every event."""
    import gradio.blocks as blocks

    from studio import plots
    from studio.server import batching
    from studio.tabs import translate

    batching.translate = timed(batching.translate, "decode start", "decode end")
    translate.plots.token_probabilities_json = timed(plots.token_probabilities_json, "figure start", "figure end")
    translate.translate = timed(translate.translate, "callback start", "callback end")

    process_api, postprocess = blocks.Blocks.process_api, blocks.Blocks.postprocess_data

    async def timed_process_api(self, block_fn, *args, **kwargs):
        start = time.time()
        result = await process_api(self, block_fn, *args, **kwargs)
        name = event_name(self, block_fn)
        EVENTS.append((name, start, time.time()))
        if name == "translate":
            ANSWER_BYTES.append(len(json.dumps(result.get("data", []), default=str)))
        return result

    async def timed_postprocess(self, block_fn, *args, **kwargs):
        start = time.time()
        result = await postprocess(self, block_fn, *args, **kwargs)
        if event_name(self, block_fn) == "translate":
            MARKS.extend([("postprocess start", start), ("postprocess end", time.time())])
        return result

    blocks.Blocks.process_api, blocks.Blocks.postprocess_data = timed_process_api, timed_postprocess


# In the page, installed before the press: the time the translation text changes and the time the plot's data
# changes (plotly keeps it on the plot's element), each seen at the next animation frame.
WATCH = """() => {
  const box = document.querySelector('#tab-translate .readout textarea');
  const tokensOf = () => JSON.stringify(document.querySelector('#tab-translate .js-plotly-plot')?.data?.[0]?.x ?? null);
  const before = {text: box.value, tokens: tokensOf()};
  const marks = {tasks: []};
  // Long tasks (over 50 ms) of the page's main thread: its own work (Svelte, plotly), not waiting.
  const tasks = new PerformanceObserver((list) => list.getEntries().forEach(
    (t) => marks.tasks.push([performance.timeOrigin + t.startTime, t.duration])));
  tasks.observe({type: 'longtask'});
  window.clickToPaint = new Promise((resolve) => {
    const look = () => {
      if (!marks.text && box.value && box.value !== before.text) marks.text = Date.now();
      if (!marks.plot && tokensOf() !== before.tokens) marks.plot = Date.now();
      if (marks.text && marks.plot) { tasks.disconnect(); resolve(marks); } else requestAnimationFrame(look);
    };
    requestAnimationFrame(look);
  });
}"""


def press(page, sentence: str) -> dict[str, float]:
    """Type the sentence, press Enter as a student does; the page's marks and the press's time (ms since the epoch)."""
    source = page.get_by_placeholder("Type a sentence and press Enter, or click an example")
    source.fill(sentence)
    page.evaluate(WATCH)
    pressed = time.time() * 1000
    source.press("Enter")
    return {**page.evaluate("() => window.clickToPaint"), "press": pressed}


def drive(url: str, clicks: int, out: dict) -> None:
    """Chromium: open the page, wait for it to be ready, then translate `clicks` sentences one after another."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.wait_for_function("() => document.documentElement.dataset.studioScripts === 'ready'", timeout=120_000)
        page.wait_for_timeout(1500)  # the page's load events (examples, model line) settle
        presses = []
        for i in range(clicks + 1):  # the first warms the model's caches: not counted
            del MARKS[:], EVENTS[:], ANSWER_BYTES[:]
            marks = press(page, SENTENCES[i % len(SENTENCES)] + ("" if i < len(SENTENCES) else f" ({i})"))
            page.wait_for_timeout(1000)  # events the answer sets off run before the next press
            if i:
                presses.append({"page": marks, "server": list(MARKS), "events": list(EVENTS),
                                "bytes": list(ANSWER_BYTES)})
        out["presses"] = presses
        browser.close()


def stages(press: dict) -> dict[str, float]:
    """Milliseconds of each stage of one press."""
    server = {name: at for name, at in press["server"]}
    page = {name: at / 1000 for name, at in press["page"].items() if name != "tasks"}
    translate_event = next(((s, e) for name, s, e in press["events"] if name == "translate"), None)
    end = translate_event[1] if translate_event else server["postprocess end"]
    points = [("the press -> the translate callback starts", page["press"], server["callback start"]),
              ("decoding", server["decode start"], server["decode end"]),
              ("the probability figure", server["figure start"], server["figure end"]),
              ("the rest of the callback", server["callback start"], server["callback end"]),
              ("Gradio's postprocessing", server["postprocess start"], server["postprocess end"]),
              ("Gradio after the callback (postprocessing included)", server["callback end"], end),
              ("-> the translation text shows", end, page["text"]),
              ("-> the plot is painted", page["text"], page["plot"]),
              ("the press -> the text", page["press"], page["text"]),
              ("the press -> the plot", page["press"], page["plot"])]
    times = {name: (b - a) * 1000 for name, a, b in points}
    # Of the answer's way to the page: how long the page's main thread was busy (long tasks after the callback).
    times[LONG_TASKS] = sum(ms for at, ms in press["page"]["tasks"] if at / 1000 >= end)
    times["the rest of the callback"] -= times["decoding"] + times["the probability figure"]
    return times


def report(presses: list[dict]) -> None:
    per_stage = defaultdict(list)
    for press in presses:
        for name, ms in stages(press).items():
            per_stage[name].append(ms)
    order = list(per_stage)
    tasks = order.pop(order.index(LONG_TASKS))
    order.insert(order.index("-> the translation text shows") + 1, tasks)
    per_stage = {name: per_stage[name] for name in order}
    print(f"{len(presses)} presses; medians (min-max), ms:")
    for name, values in per_stage.items():
        print(f"  {name:<55} {statistics.median(values):7.1f}  ({min(values):.1f}-{max(values):.1f})")
    events = defaultdict(list)
    for press in presses:
        for name, start, end in press["events"]:
            events[name].append((end - start) * 1000)
    print("events each press set off (Gradio functions run), count per press and median server ms:")
    for name, values in sorted(events.items(), key=lambda kv: -len(kv[1])):
        print(f"  {name:<40} {len(values) / len(presses):4.1f}  {statistics.median(values):7.1f}")
    sizes = [b for press in presses for b in press["bytes"]]
    if sizes:
        print(f"the translate answer's JSON: median {statistics.median(sizes) / 1024:.1f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clicks", type=int, default=12, help="translations timed (after one untimed)")
    parser.add_argument("--threads", type=int, default=1, help="the studio's torch threads (its default: 1)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"click_to_paint.py: needs Chromium at {CHROMIUM}")
    install_timers()
    port = free_port()
    out: dict = {}

    def browse() -> None:
        from bench.serving import wait_for_url

        status = 1
        try:
            wait_for_url(f"http://127.0.0.1:{port}/", timeout=120)
            drive(f"http://127.0.0.1:{port}/", args.clicks, out)
            report(out["presses"])
            print(f"load average: {os.getloadavg()[0]:.1f}")
            status = 0
        except Exception:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(status)  # the studio's server thread does not return

    threading.Thread(target=browse, daemon=True).start()
    from studio.app import main as studio
    asyncio.set_event_loop(asyncio.new_event_loop())
    studio(["--port", str(port), "--threads", str(args.threads)])


if __name__ == "__main__":
    main()
