"""Abuse: what one visitor can take from a public studio (issue 55), at full size.

    python bench/abuse.py [--checkpoints-dir checkpoints] [--model multi30k-de-en-small] [--sessions 100]
                          [--skip compare,sessions] [--json]

Starts `python -m studio --public` on 127.0.0.1 (a free port; nothing else is contacted; its sessions are
forgotten after --forget-after seconds instead of two minutes, so that the last part ends soon) and measures, as
a stranger would provoke them:

- saliency: /saliency, integrated gradients at 64 steps on a 2,000-character source and target: the studio's CPU
  seconds and wall time for the one request, the steps it used and its notice, and its RSS at the peak;
- disconnect: the same request, its client gone after 3 s: seconds until the studio's CPU use falls (below a
  tenth of a core over half a second);
- attention: /attention of 2,000 "A"s: the answer's size, CPU seconds, time;
- compare: one client (one session) sends four /compare of 500 Multi30k train sentences with beam 4 at once, while
  another visitor calls a short /attention once a second: the short one's latencies, and each /compare's CPU;
- sessions: --sessions page sessions that load the page and leave (no heartbeat), and a tenth as many that
  /translate and /attention 2,000 characters, in two waves: RSS per session once each wave is forgotten (the
  first wave also raises the high-water mark, which the second reuses).

Prints the figures with the machine's load average (other people's jobs included). Goals on 2 cores: a request
costs at most ~40 CPU-seconds and answers within 60 s; its work stops within 2 s of its client leaving;
/attention answers at most 5 MB; the short /attention answers within 5 s while the four /compare run; a
forgotten session keeps at most 0.25 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.load import cpu_seconds, rss_mb  # noqa: E402
from bench.serving import free_port, wait_for  # noqa: E402

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The studio, public, with sessions forgotten after FORGET seconds (a sweep every second).
LAUNCH = ("import sys; from studio.server import sessions; "
          "sessions.API_IDLE_S = sessions.CLOSED_S = float(sys.argv[1]); "
          "sessions.SWEEP_EVERY_S = 1.0; from studio.app import main; main(sys.argv[2:])")
GERMAN = ("Ein Mann mit einem orangefarbenen Hut starrt auf etwas. Zwei junge Männer spielen Fußball auf einer "
          "Wiese. Eine Frau in einem roten Kleid geht die Straße entlang. ")
LONG_GERMAN = (GERMAN * 20)[:2000]
EXPERIMENTS = ("saliency", "disconnect", "attention", "compare", "sessions")


class Studio:
    """The studio in a subprocess (niced: a training run elsewhere on the machine keeps its core)."""

    def __init__(self, checkpoints: Path, forget_after: float, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_TEMP_DIR": str(workdir / "gradio")}
        self.log = open(workdir / "studio.log", "w")
        self.proc = subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", LAUNCH, str(forget_after), "--public",
                                      "--port", str(self.port), "--checkpoints-dir", str(checkpoints)],
                                     cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self.url, self.proc, 300)

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss(self) -> float:
        return rss_mb(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def call(url: str, api: str, data: list) -> tuple[str, object, int]:
    """POST /gradio_api/call/API, its own session: (event, data, bytes of the answer's stream)."""
    body = stream(url, api, data).read()
    lines = body.decode().splitlines()
    events = [(lines[i][6:].strip(), lines[i + 1][5:].strip()) for i in range(len(lines) - 1)
              if lines[i].startswith("event:") and lines[i + 1].startswith("data:")]
    event, data = events[-1]
    return event, json.loads(data), len(body)


def stream(url: str, api: str, data: list):
    request = urllib.request.Request(f"{url}gradio_api/call/{api}", json.dumps({"data": data}).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        event_id = json.load(r)["event_id"]
    return urllib.request.urlopen(f"{url}gradio_api/call/{api}/{event_id}", timeout=600)


def measured(studio: Studio, api: str, data: list) -> dict:
    """One call with the studio's CPU seconds, wall time and peak RSS over it."""
    peak, done = [studio.rss()], threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            peak.append(studio.rss())
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    cpu, began = studio.cpu(), time.monotonic()
    event, answer, size = call(studio.url, api, data)
    result = {"event": event, "cpu_s": round(studio.cpu() - cpu, 1), "wall_s": round(time.monotonic() - began, 1),
              "answer_mb": round(size / 2**20, 2), "rss_before_mb": peak[0]}
    done.set()
    watcher.join()
    return result | {"rss_peak_mb": max(peak), "answer": answer}


def saliency(studio: Studio, model: str) -> dict:
    r = measured(studio, "saliency", [model, LONG_GERMAN, LONG_GERMAN, "integrated_gradients", 64])
    answer = r.pop("answer")
    first = answer[0] if isinstance(answer, list) else answer
    return r | {"steps": first.get("steps"), "notices": [n for n in first.get("notices", []) if "steps" in n]}


def disconnect(studio: Studio, model: str) -> dict:
    """The saliency request abandoned after 3 s: seconds until the studio's CPU use falls."""
    response = stream(studio.url, "saliency", [model, LONG_GERMAN, LONG_GERMAN, "integrated_gradients", 64])
    time.sleep(3.0)  # let it work: a wall-clock wait is what is measured here
    working = cpu_rate(studio)
    response.close()
    left = time.monotonic()
    while cpu_rate(studio) > 0.1 and time.monotonic() - left < 60:
        pass
    return {"cpu_rate_while_working": round(working, 2), "stopped_after_s": round(time.monotonic() - left, 2)}


def cpu_rate(studio: Studio, window: float = 0.5) -> float:
    """The studio's CPU use over the next window seconds, in cores."""
    cpu, began = studio.cpu(), time.monotonic()
    time.sleep(window)
    return (studio.cpu() - cpu) / (time.monotonic() - began)


def attention(studio: Studio, model: str) -> dict:
    r = measured(studio, "attention", [model, "A" * 2000, ""])
    answer = r.pop("answer")
    first = answer[0] if isinstance(answer, list) else answer
    return r | {"notices": [n for n in first.get("notices", []) if n.startswith("left out")]}


def compare(studio: Studio, model: str) -> dict:
    """Four /compare of 500 sentences from one session, and another visitor's short /attention each second."""
    from gradio_client import Client

    abuser, visitor = Client(studio.url, verbose=False), Client(studio.url, verbose=False)
    cpu, began = studio.cpu(), time.monotonic()
    jobs = [abuser.submit(model, model, GERMAN, "beam 4", "Multi30k (de–en)", "train", 500, api_name="/compare")
            for _ in range(4)]
    latencies = []
    while not all(job.done() for job in jobs):
        asked = time.monotonic()
        visitor.predict(model=model, source="Ein Hund rennt durch den Schnee.", api_name="/attention")
        latencies.append(round(time.monotonic() - asked, 2))
        time.sleep(1.0)  # once a second, as a visitor clicking
    outcomes = []
    for job in jobs:
        try:
            outcomes.append(job.result()["scores"]["on"])
        except Exception as exc:  # turned away: the message is the figure
            outcomes.append(f"refused: {str(exc)[:120]}")
    return {"compare_outcomes": outcomes, "all_cpu_s": round(studio.cpu() - cpu, 1),
            "all_wall_s": round(time.monotonic() - began, 1), "short_attention_latency_s": latencies,
            "short_attention_max_s": max(latencies, default=None)}


def page_session(url: str, config: dict) -> None:
    """What a browser does when it opens the page, without the heartbeat that would say when it leaves: every
    load event run in a new session, its answers read."""
    session = secrets.token_hex(6)
    values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
    loads = [d for d in config["dependencies"] if any(t[1] == "load" for t in d["targets"])]
    for dependency in loads:
        body = {"data": [values.get(i) for i in dependency["inputs"]], "fn_index": dependency["id"],
                "session_hash": session, "trigger_id": None, "event_data": None}
        request = urllib.request.Request(f"{url}gradio_api/queue/join", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=60).close()
    with urllib.request.urlopen(f"{url}gradio_api/queue/data?session_hash={session}", timeout=120) as r:
        r.read()  # until the stream closes: every load answered


def sessions(studio: Studio, model: str, n: int, forget_after: float, waves: int = 2) -> dict:
    """RSS per forgotten session, wave after wave: n page sessions and n // 10 sessions with 2,000-character
    requests, then the time for the studio to forget them. The first wave also raises the high-water mark that
    later waves reuse; the later ones show what each forgotten session keeps."""
    with urllib.request.urlopen(f"{studio.url}config", timeout=60) as r:
        config = json.load(r)
    for _ in range(3):  # warm-up: the first sessions build caches that stay (plots, tokenizers)
        page_session(studio.url, config)
        call(studio.url, "attention", [model, LONG_GERMAN, ""])
    time.sleep(forget_after + 5)  # forgotten on the studio's clock
    heavy = max(1, n // 10)
    results = {"page_sessions": n, "heavy_sessions": heavy, "rss_before_mb": studio.rss(), "waves": []}
    for wave in range(waves):
        before = studio.rss()
        for _ in range(n):
            page_session(studio.url, config)
        for i in range(heavy):
            text = f"{wave} {i} {LONG_GERMAN}"[:2000]
            call(studio.url, "translate", [model, text, "beam", 4, 0.6, 50, 4, 1.0, 0, 1.0, "", "fp32"])
            call(studio.url, "attention", [model, text, ""])
        made = studio.rss()
        time.sleep(forget_after + 5)
        after = studio.rss()
        results["waves"].append({"rss_with_sessions_mb": made, "rss_forgotten_mb": after,
                                 "mb_per_forgotten_session": round((after - before) / (n + heavy), 3)})
    return results


def run(args: argparse.Namespace) -> dict:
    checkpoints = args.checkpoints_dir.resolve()
    with tempfile.TemporaryDirectory(prefix="abuse-") as workdir:
        studio = Studio(checkpoints, args.forget_after, Path(workdir))
        results: dict = {"model": args.model}
        try:
            for name in EXPERIMENTS:
                if name in args.skip:
                    continue
                began = time.monotonic()
                if name == "sessions":
                    results[name] = sessions(studio, args.model, args.sessions, args.forget_after)
                else:
                    results[name] = globals()[name](studio, args.model)
                print(f"{name} ({time.monotonic() - began:.0f} s): {results[name]}", file=sys.stderr, flush=True)
        finally:
            studio.close()
    results["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoints-dir", type=Path, default=ROOT / "checkpoints")
    parser.add_argument("--model", default="multi30k-de-en-small")
    parser.add_argument("--sessions", type=int, default=100, help="page sessions opened and left")
    parser.add_argument("--forget-after", type=float, default=10.0,
                        help="seconds the studio keeps an idle session (the studio's own: 120; closed pages 60)")
    parser.add_argument("--skip", default="", help=f"experiments left out, comma-separated: {', '.join(EXPERIMENTS)}")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    results = run(args)
    print(json.dumps(results, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in results.items()))


if __name__ == "__main__":
    main()
