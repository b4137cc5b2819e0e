"""Load: N concurrent visitors translating for S seconds while the Train tab trains a model.

    python bench/load.py [--seconds 60] [--clients 20] [--checkpoints-dir checkpoints]
                         [--model NAME] [--method beam] [--driver gradio_client|http] [--no-train] [--json]

Starts `python -m studio` on 127.0.0.1 (a free port; nothing else is contacted), starts a training
run through the Train tab's API endpoint (`/train_start`, the lecture defaults with a step count
that outlasts the test), then lets each client (its own gradio_client session, so its own queue
entry) translate example sentences back to back through `/translate` until the time is up.
Prints requests served, errors (a full queue counted apart: Gradio refuses those at once with
"Queue is full"), latency percentiles as the client sees them (queue wait included), the training
steps taken meanwhile, the CPU the studio and the clients used, and the machine's load average,
which includes other people's jobs. `--driver http` replaces gradio_client by plain HTTP calls to
Gradio's REST API (same queue, ~1/30 of the client CPU: on a 2-core box the 20 gradio_client
clients otherwise use more CPU than the studio). Goal on 2 CPU cores: 0 errors, p95 <= 2 s with
20 clients.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.serving import free_port, wait_for  # noqa: E402
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

FALLBACK_SENTENCES = ["twenty - one", "three hundred forty - seven", "9 7", "ninety - eight"]
TRAIN_NAME = "load-test-training"


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    queue_full: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def start_studio(port: int, checkpoints: Path, workdir: Path) -> subprocess.Popen:
    """The studio in a subprocess; its uploads folder and log (studio.log) go to workdir."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_TEMP_DIR": str(workdir / "gradio")}
    with open(workdir / "studio.log", "w") as log:
        return subprocess.Popen([sys.executable, "-m", "studio", "--host", "127.0.0.1", "--port", str(port),
                                 "--checkpoints-dir", str(checkpoints)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def pick_model(checkpoints: Path, wanted: str | None) -> tuple[str, list[str]]:
    """The model to translate with and its example sentences (config.json's "examples")."""
    names = sorted(p.name for p in checkpoints.iterdir()
                   if (p / "config.json").is_file() and not p.name.startswith("."))
    name = wanted or ("numbers-en-de-tiny" if "numbers-en-de-tiny" in names else names[0])
    config = json.loads((checkpoints / name / "config.json").read_text())
    examples = [str(e[0] if isinstance(e, list) else e) for e in config.get("examples") or []]
    return name, examples or FALLBACK_SENTENCES


def train_values(steps: int) -> list:
    """The Train tab's set-up panel (studio.tabs.train.FIELDS order): its defaults, a long run."""
    from core.config import PRESETS
    from studio.tabs.train_form import DEFAULTS as d

    p = PRESETS[d.preset]
    return ["Synthetic task", d.data.split(":")[1], "", None, "", "", "", 0, TRAIN_NAME, d.preset,
            p["encoder_layers"], p["d_model"], p["n_heads"], p["d_ff"], p["dropout"], d.vocab_size, steps,
            d.warmup, d.lr_factor, d.label_smoothing, d.max_tokens, d.clip_norm, d.eval_every, d.attention_every]


def training_step(client, model: str) -> int | None:
    """The step the Train tab shows now (from its progress bar's text), to a page showing `model`."""
    outputs = client.predict(1, 0, model, api_name="/train_view")  # its decoder layer and head sliders, picker
    match = re.search(r"Step ([\d,]+) of", " ".join(str(o) for o in outputs))
    return int(match[1].replace(",", "")) if match else None


def first_step(client, model: str, timeout: float = 600.0) -> int | None:
    """The Train tab's step once the run has prepared its data and model and taken a step. Preparing takes
    seconds on a quiet machine and minutes on a loaded one: the timeout only guards against a hang."""
    deadline = time.monotonic() + timeout
    while (step := training_step(client, model)) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return step


class HttpClient:
    """Gradio's REST API with the standard library (POST /gradio_api/call/NAME, then read the
    event stream): the same queue as gradio_client, at a fraction of its CPU cost per request,
    which matters when the load generator shares the studio's two cores."""

    def __init__(self, url: str):
        self.base = url.rstrip("/") + "/gradio_api/call"
        self.session = secrets.token_hex(8)  # one session per visitor, as a browser tab has

    def predict(self, *data, api_name: str):
        body = json.dumps({"data": list(data), "session_hash": self.session}).encode()
        request = urllib.request.Request(self.base + api_name, body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                event_id = json.load(response)["event_id"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(exc.read().decode(errors="replace")) from None  # 503: "Queue is full..."
        with urllib.request.urlopen(f"{self.base}{api_name}/{event_id}", timeout=120) as stream:
            event = ""
            for line in stream:
                line = line.decode().strip()
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    if event == "error":
                        raise RuntimeError(f"error event: {line[5:].strip()[:200]}")
                    return json.loads(line[5:])
        raise RuntimeError("the event stream ended without a result")


def make_client(url: str, driver: str):
    if driver == "http":
        return HttpClient(url)
    from gradio_client import Client

    return Client(url, verbose=False, download_files=False)


def visitor(url: str, model: str, sentences: list[str], method: str, deadline: float, results: Results,
            index: int, driver: str) -> None:
    client = make_client(url, driver)
    n = index
    while time.monotonic() < deadline:
        text = sentences[n % len(sentences)]
        n += 1
        started = time.perf_counter()
        try:
            client.predict(model, text, method, 4, 0.6, 50, 4, 1.0, 0, 1.0, None, "fp32", api_name="/translate")
        except Exception as exc:  # every failure is counted, by kind
            with results.lock:
                if "Queue is full" in str(exc):
                    results.queue_full += 1
                else:
                    results.errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            time.sleep(0.5)  # as a person would, before trying again
            continue
        with results.lock:
            results.latencies.append(time.perf_counter() - started)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(args: argparse.Namespace) -> dict:
    model, sentences = pick_model(args.checkpoints_dir, args.model)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    workdir = Path(tempfile.mkdtemp(prefix="studio-load-"))
    proc = start_studio(port, args.checkpoints_dir, workdir)
    try:
        started_in = wait_for(url, proc, timeout=90.0)
        control = make_client(url, "gradio_client")
        control.predict(model, sentences[0], args.method, 4, 0.6, 50, 4, 1.0, 0, 1.0, None, "fp32",
                        api_name="/translate")  # loads the model once, before the clock starts
        step_before = None
        if args.train:
            control.predict(*train_values(10**6), api_name="/train_start")
            step_before = first_step(control, model)
        load_before = os.getloadavg()
        results = Results()
        deadline = time.monotonic() + args.seconds
        threads = [threading.Thread(target=visitor, daemon=True,
                                    args=(url, model, sentences, args.method, deadline, results, i, args.driver))
                   for i in range(args.clients)]
        t0 = time.monotonic()
        cpu0, own0 = cpu_seconds(proc.pid), own_cpu_seconds()
        for t in threads:
            t.start()
        for t in threads:
            t.join(args.seconds + 120)
        elapsed = time.monotonic() - t0
        studio_cpu, client_cpu = cpu_seconds(proc.pid) - cpu0, own_cpu_seconds() - own0
        load_after = os.getloadavg()
        step_after = training_step(control, model) if args.train else None
        if args.train:
            control.predict(api_name="/train_stop")
        lat = results.latencies
        return {
            "clients": args.clients, "driver": args.driver, "seconds": round(elapsed, 1), "model": model,
            "method": args.method,
            "training": args.train, "served": len(lat), "errors": sum(results.errors.values()),
            "error_kinds": dict(results.errors), "queue_full": results.queue_full,
            "throughput_per_s": round(len(lat) / elapsed, 2),
            "p50_s": round(percentile(lat, 0.50), 3), "p95_s": round(percentile(lat, 0.95), 3),
            "p99_s": round(percentile(lat, 0.99), 3), "max_s": round(max(lat, default=float("nan")), 3),
            "mean_s": round(statistics.fmean(lat), 3) if lat else None,
            "training_steps_during_load": (step_after - step_before) if None not in (step_before, step_after)
            else None,
            "studio_cpu_s": round(studio_cpu, 1), "clients_cpu_s": round(client_cpu, 1),
            "studio_cpu_ms_per_request": round(1000 * studio_cpu / max(len(lat), 1), 1),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after], "cpus": os.cpu_count(),
            "studio_started_in_s": round(started_in, 1),
        }
    except BaseException:
        print(f"the studio's log: {workdir / 'studio.log'}", file=sys.stderr)
        workdir = None  # kept for reading
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def report(r: dict) -> str:
    training = f"while training ({r['training_steps_during_load']} steps taken meanwhile)" if r["training"] else \
        "no training"
    lines = [f"{r['clients']} clients ({r['driver']}) x {r['seconds']} s, {r['method']} on {r['model']}, {training}",
             f"served {r['served']} ({r['throughput_per_s']}/s) · errors {r['errors']} · refused (queue full) "
             f"{r['queue_full']}",
             f"latency p50 {r['p50_s']} s · p95 {r['p95_s']} s · p99 {r['p99_s']} s · max {r['max_s']} s",
             f"CPU used: studio {r['studio_cpu_s']} s ({r['studio_cpu_ms_per_request']} ms a request, training "
             f"included), the {r['clients']} clients {r['clients_cpu_s']} s",
             f"load average (1, 5, 15 min) before {r['load_average_before']}, after {r['load_average_after']} "
             f"on {r['cpus']} CPUs (includes every other process on the machine)"]
    lines += [f"  error: {n} x {kind}" for kind, n in r["error_kinds"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--checkpoints-dir", type=Path, default=ROOT / "checkpoints")
    parser.add_argument("--model", help="checkpoint folder name (default: numbers-en-de-tiny)")
    parser.add_argument("--method", default="beam", choices=["beam", "greedy", "sample"])
    parser.add_argument("--driver", default="gradio_client", choices=["gradio_client", "http"],
                        help="gradio_client (default) or plain HTTP to Gradio's REST API (far less client CPU)")
    parser.add_argument("--no-train", dest="train", action="store_false", help="no training run meanwhile")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 200 or not 1 <= args.seconds <= 600:
        parser.error("keep it bounded: 1-200 clients, 1-600 seconds")
    result = run(args)
    print(report(result))
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
