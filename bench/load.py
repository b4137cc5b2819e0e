"""Load: a class of visitors connecting at once and calling the studio for S seconds while a model trains.

    python bench/load.py [--seconds 60] [--clients 50] [--checkpoints-dir checkpoints] [--model NAME]
                         [--mix translate,attention,beam] [--method beam] [--driver gradio_client|http|async]
                         [--no-train] [--idle-sessions 1000] [--session per-visitor|none|both] [--json]

Starts `python -m studio` on 127.0.0.1 (a free port; nothing else is contacted), starts a training run
through the Train tab's API (`/train_start`, the lecture defaults with a step count that outlasts the test)
and measures its steps/s alone; then every client connects in the same instant (gradio_client fetches the
page's config and API description; the http driver fetches /config, as a browser does), and each, its own
session, calls the studio back to back until the time is up, taking turns through --mix: `/translate`
(beam 4 by default), `/attention` (every map as JSON) and `/beam_run` (a whole beam search). Prints
connections made and failed, requests served, errors (a full queue counted apart), latency percentiles as the
client sees them (queue wait included), translations/s, training steps/s before and during, the studio's CPU
and RSS before and after, and the machine's load average, which includes other people's jobs.
--idle-sessions N then opens N more sessions (one short translation each) and reads the RSS once they are
made and again once the studio has had time to forget them (studio/server/sessions.py: API_IDLE_S, SWEEP_EVERY_S).
`--driver http` replaces gradio_client by plain HTTP calls to Gradio's REST API (same queue, ~1/30 of the
client CPU: on a 2-core box 40 gradio_client clients otherwise use more CPU than the studio); `--driver async`
runs every visitor as a task of one event loop in this one process (httpx), the lightest load generator. Goal
on 2 CPU cores (issue 54): 40 visitors translating with beam 4, 0 errors and p95 <= 1.5 s.
`--session none` (async driver) sends no session_hash, as Gradio's curl examples do: Gradio makes each call a
session of its own; `--session both` runs the class each way, one after the other, and prints the ratios (issue 64:
every client served alike, CPU a request and translations/s within a few per cent).
"""
from __future__ import annotations

import argparse
import json
import os
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
MIX = ("translate", "attention", "beam")


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)  # requests served, by --mix kind
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
    """The Train tab's set-up panel (studio.train.form.FIELDS order): its defaults, a long run."""
    from dataclasses import replace

    from studio.train.form import DEFAULTS, form_values

    return list(form_values(replace(DEFAULTS, max_steps=steps, name=TRAIN_NAME)))


def training_step(client) -> int | None:
    """The training run's step now (/train_status), None before its first. (The Train tab's /train_view answers
    a session only what changed since it last asked: read twice within one step, it said nothing.)"""
    status = client.predict(api_name="/train_status")
    return status["step"] if status["state"] in ("running", "paused", "stopping") and status["step"] else None


def first_step(client, timeout: float = 600.0) -> int | None:
    """The Train tab's step once the run has prepared its data and model and taken a step. Preparing takes
    seconds on a quiet machine and minutes on a loaded one: the timeout only guards against a hang."""
    deadline = time.monotonic() + timeout
    while (step := training_step(client)) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    return step


class HttpClient:
    """Gradio's REST API with the standard library (POST /gradio_api/call/NAME, then read the
    event stream): the same queue as gradio_client, at a fraction of its CPU cost per request,
    which matters when the load generator shares the studio's two cores."""

    def __init__(self, url: str):
        self.base = url.rstrip("/") + "/gradio_api/call"
        self.session = secrets.token_hex(8)  # one session per visitor, as a browser tab has

    def connect(self) -> None:
        """What a browser fetches first: the page's configuration."""
        with urllib.request.urlopen(self.base.rsplit("/gradio_api", 1)[0] + "/config", timeout=120) as response:
            response.read()

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
        client = HttpClient(url)
        client.connect()
        return client
    from gradio_client import Client

    return Client(url, verbose=False, download_files=False)


def connect_all(url: str, n: int, driver: str) -> tuple[list, list[float], Counter]:
    """n clients connecting in the same instant: (the clients made, seconds each took, failures by kind)."""
    clients, seconds, failures, lock = [], [], Counter(), threading.Lock()
    barrier = threading.Barrier(n)

    def connect() -> None:
        barrier.wait()
        started = time.perf_counter()
        try:
            client = make_client(url, driver)
        except Exception as exc:  # counted: a visitor who could not open the page
            with lock:
                failures[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            return
        with lock:
            clients.append(client)
            seconds.append(time.perf_counter() - started)
    threads = [threading.Thread(target=connect, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return clients, seconds, failures


def request(kind: str, model: str, text: str, method: str) -> tuple[str, list]:
    """The endpoint and arguments of one request of the --mix kind: a translation, every attention map, or a whole
    beam search (docs/api.md)."""
    if kind == "translate":
        return "/translate", [model, text, method, 4, 0.6, 50, 4, 1.0, 0, 1.0, "", "fp32"]
    if kind == "attention":
        return "/attention", [model, text, ""]
    return "/beam_run", [None, model, text, 4, 0.6, "gnmt", 50]


def call(client, kind: str, model: str, text: str, method: str) -> None:
    api_name, data = request(kind, model, text, method)
    client.predict(*data, api_name=api_name)


def count_failure(results: Results, exc: Exception) -> None:
    """A request that failed, by kind (a full queue apart)."""
    with results.lock:
        if "Queue is full" in str(exc):
            results.queue_full += 1
        else:
            results.errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1


# ----- --driver async: every visitor a task of one event loop, over Gradio's REST and queue API ------------------
async def async_class(url: str, n: int, model: str, sentences: list[str], method: str, mix: list[str],
                      seconds: float, results: Results,
                      sessions: bool = True) -> tuple[int, list[float], Counter, float]:
    """n visitors connecting at once (GET /config, as a browser does), then calling back to back for `seconds`,
    all in this one thread: the generator's own CPU is a small fraction of the studio's, so that 40 visitors on
    the studio's two cores measure the studio. (connected, seconds each took to connect, failures, elapsed)."""
    import asyncio

    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=120, limits=limits) as http:
        async def connect() -> float:
            started = time.perf_counter()
            (await http.get("/config")).raise_for_status()
            return time.perf_counter() - started

        made = await asyncio.gather(*(connect() for _ in range(n)), return_exceptions=True)
        seconds_each = [s for s in made if isinstance(s, float)]
        failures = Counter(f"{type(e).__name__}: {str(e)[:80]}" for e in made if isinstance(e, BaseException))
        t0 = time.monotonic()
        deadline = t0 + seconds
        await asyncio.gather(*(async_visitor(http, model, sentences, method, mix, deadline, results, i, sessions)
                               for i in range(len(seconds_each))))
        return len(seconds_each), seconds_each, failures, time.monotonic() - t0


async def async_visitor(http, model: str, sentences: list[str], method: str, mix: list[str], deadline: float,
                        results: Results, index: int, sessions: bool = True) -> None:
    """One visitor's session (sessions=False: none, each call Gradio's new one): POST /gradio_api/call/NAME, then
    read its event stream to the result."""
    import asyncio

    session, n = secrets.token_hex(8) if sessions else None, index
    while time.monotonic() < deadline:
        text, kind = sentences[n % len(sentences)], mix[n % len(mix)]
        n += 1
        api_name, data = request(kind, model, text, method)
        started = time.perf_counter()
        try:
            await async_predict(http, api_name, data, session)
        except Exception as exc:  # every failure is counted, by kind
            count_failure(results, exc)
            await asyncio.sleep(0.5)  # as a person would, before trying again
            continue
        with results.lock:
            results.latencies.append(time.perf_counter() - started)
            results.kinds[kind] += 1


async def async_predict(http, api_name: str, data: list, session: str | None) -> None:
    body = {"data": data} if session is None else {"data": data, "session_hash": session}
    posted = await http.post(f"/gradio_api/call{api_name}", json=body)
    if posted.status_code != 200:
        raise RuntimeError(posted.text[:200])  # 503: "Queue is full..."
    event = ""
    async with http.stream("GET", f"/gradio_api/call{api_name}/{posted.json()['event_id']}") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                if event == "error":
                    raise RuntimeError(f"error event: {line[5:].strip()[:200]}")
                return
    raise RuntimeError("the event stream ended without a result")


def visitor(client, model: str, sentences: list[str], method: str, mix: list[str], deadline: float,
            results: Results, index: int) -> None:
    n = index
    while time.monotonic() < deadline:
        text, kind = sentences[n % len(sentences)], mix[n % len(mix)]
        n += 1
        started = time.perf_counter()
        try:
            call(client, kind, model, text, method)
        except Exception as exc:  # every failure is counted, by kind
            count_failure(results, exc)
            time.sleep(0.5)  # as a person would, before trying again
            continue
        with results.lock:
            results.latencies.append(time.perf_counter() - started)
            results.kinds[kind] += 1


def threaded_class(url: str, args: argparse.Namespace, model: str, sentences: list[str],
                   results: Results) -> tuple[int, list[float], Counter, float]:
    """--driver gradio_client or http: a thread per visitor. (connected, seconds each took, failures, elapsed)."""
    clients, connect_s, connect_failures = connect_all(url, args.clients, args.driver)
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=visitor, daemon=True,
                                args=(client, model, sentences, args.method, args.mix, deadline, results, i))
               for i, client in enumerate(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.seconds + 120)
    return len(clients), connect_s, connect_failures, time.monotonic() - t0


def rss_mb(pid: int) -> float:
    """A process's resident memory (Linux /proc), in MB."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS"))
    return round(int(line.split()[1]) / 1024, 1)


def steps_per_s(control, seconds: float) -> float | None:
    """The training run's pace over the next `seconds`, from the Train tab's step."""
    before, t0 = training_step(control), time.monotonic()
    time.sleep(seconds)
    after = training_step(control)
    return None if None in (before, after) else round((after - before) / (time.monotonic() - t0), 2)


def idle_sessions(url: str, pid: int, model: str, sentences: list[str], n: int, wait_s: float) -> dict:
    """RSS after n more sessions, each one short greedy translation, then once they are idle for wait_s."""
    before = rss_mb(pid)
    queue = list(range(n))
    lock = threading.Lock()

    def open_some() -> None:
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop()
            HttpClient(url).predict(model, sentences[i % len(sentences)], "greedy", 1, 0.6, 10, 1, 1.0, 0, 1.0, "",
                                    "fp32", api_name="/translate")
    threads = [threading.Thread(target=open_some) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = rss_mb(pid)
    time.sleep(wait_s)  # the studio forgets them on its own clock: nothing to poll
    return {"idle_sessions": n, "rss_before_sessions_mb": before, "rss_with_sessions_mb": made,
            "rss_after_idle_mb": rss_mb(pid), "idle_wait_s": wait_s}


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
        control.predict(model, sentences[0], args.method, 4, 0.6, 50, 4, 1.0, 0, 1.0, "", "fp32",
                        api_name="/translate")  # loads the model once, before the clock starts
        step_before = pace_before = None
        if args.train:
            control.predict(*train_values(10**6), api_name="/train_start")
            first_step(control)
            pace_before = steps_per_s(control, args.train_sample)
            step_before = training_step(control)
        rss_before, load_before = rss_mb(proc.pid), os.getloadavg()
        cpu0, own0 = cpu_seconds(proc.pid), own_cpu_seconds()
        results = Results()
        if args.driver == "async":
            import asyncio

            connected, connect_s, connect_failures, elapsed = asyncio.run(async_class(
                url, args.clients, model, sentences, args.method, args.mix, args.seconds, results,
                args.session != "none"))
        else:
            connected, connect_s, connect_failures, elapsed = threaded_class(url, args, model, sentences, results)
        studio_cpu, client_cpu = cpu_seconds(proc.pid) - cpu0, own_cpu_seconds() - own0
        load_after = os.getloadavg()
        step_after = training_step(control) if args.train else None
        if args.train:
            control.predict(api_name="/train_stop")
        rss_after = rss_mb(proc.pid)
        idle = idle_sessions(url, proc.pid, model, sentences, args.idle_sessions, args.idle_wait) \
            if args.idle_sessions else {}
        lat = results.latencies
        steps = (step_after - step_before) if None not in (step_before, step_after) else None
        return {
            "clients": args.clients, "driver": args.driver, "session": args.session, "seconds": round(elapsed, 1),
            "model": model,
            "method": args.method, "mix": args.mix, "connected": connected,
            "connect_failures": dict(connect_failures),
            "connect_p50_s": round(percentile(connect_s, 0.5), 2), "connect_max_s": round(max(connect_s, default=0), 2),
            "training": args.train, "served": len(lat), "served_by_kind": dict(results.kinds),
            "errors": sum(results.errors.values()), "error_kinds": dict(results.errors),
            "queue_full": results.queue_full, "throughput_per_s": round(len(lat) / elapsed, 2),
            "translations_per_s": round(results.kinds["translate"] / elapsed, 2),
            "p50_s": round(percentile(lat, 0.50), 3), "p95_s": round(percentile(lat, 0.95), 3),
            "p99_s": round(percentile(lat, 0.99), 3), "max_s": round(max(lat, default=float("nan")), 3),
            "mean_s": round(statistics.fmean(lat), 3) if lat else None,
            "training_steps_during_load": steps, "training_steps_per_s_before": pace_before,
            "training_steps_per_s_during": round(steps / elapsed, 2) if steps is not None else None,
            "studio_cpu_s": round(studio_cpu, 1), "clients_cpu_s": round(client_cpu, 1),
            "studio_cpu_ms_per_request": round(1000 * studio_cpu / max(len(lat), 1), 1),
            "rss_before_mb": rss_before, "rss_after_mb": rss_after, **idle,
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
    if r["training"]:
        training += f", {r['training_steps_per_s_before']} steps/s before, {r['training_steps_per_s_during']} during"
    lines = [f"{r['clients']} clients ({r['driver']}, session: {r['session']}) x {r['seconds']} s, "
             f"{'+'.join(r['mix'])} ({r['method']}) on "
             f"{r['model']}, {training}",
             f"connected {r['connected']} of {r['clients']} at once (p50 {r['connect_p50_s']} s, max "
             f"{r['connect_max_s']} s) · failed {sum(r['connect_failures'].values())}",
             f"served {r['served']} ({r['throughput_per_s']}/s; {r['served_by_kind']}; translations "
             f"{r['translations_per_s']}/s) · errors {r['errors']} · refused (queue full) {r['queue_full']}",
             f"latency p50 {r['p50_s']} s · p95 {r['p95_s']} s · p99 {r['p99_s']} s · max {r['max_s']} s",
             f"CPU used: studio {r['studio_cpu_s']} s ({r['studio_cpu_ms_per_request']} ms a request, training "
             f"included), the {r['clients']} clients {r['clients_cpu_s']} s",
             f"studio RSS {r['rss_before_mb']} MB before, {r['rss_after_mb']} MB after",
             f"load average (1, 5, 15 min) before {r['load_average_before']}, after {r['load_average_after']} "
             f"on {r['cpus']} CPUs (includes every other process on the machine)"]
    if r.get("idle_sessions"):
        lines.append(f"{r['idle_sessions']} more API sessions: RSS {r['rss_before_sessions_mb']} -> "
                     f"{r['rss_with_sessions_mb']} MB, {r['rss_after_idle_mb']} MB after {r['idle_wait_s']:.0f} s idle")
    lines += [f"  error: {n} x {kind}" for kind, n in {**r["connect_failures"], **r["error_kinds"]}.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--mix", type=lambda text: text.split(","), default=["translate", "attention", "beam"],
                        help="what each client calls, in turn: translate, attention, beam (comma-separated)")
    parser.add_argument("--train-sample", type=float, default=10.0,
                        help="seconds the training run's pace is measured for before the load")
    parser.add_argument("--idle-sessions", type=int, default=0, help="then open this many more API sessions")
    parser.add_argument("--idle-wait", type=float, default=150.0,
                        help="seconds to let them idle before the last RSS reading")
    parser.add_argument("--checkpoints-dir", type=Path, default=ROOT / "checkpoints")
    parser.add_argument("--model", help="checkpoint folder name (default: numbers-en-de-tiny)")
    parser.add_argument("--method", default="beam", choices=["beam", "greedy", "sample"])
    parser.add_argument("--driver", default="gradio_client", choices=["gradio_client", "http", "async"],
                        help="gradio_client (default); http: a thread a visitor on Gradio's REST API (far less client "
                             "CPU); async: every visitor a task of one event loop (the least)")
    parser.add_argument("--session", default="per-visitor", choices=["per-visitor", "none", "both"],
                        help="async driver: a session_hash per visitor (as a page has), none (as curl sends), or "
                             "both, one run each, with their ratios")
    parser.add_argument("--no-train", dest="train", action="store_false", help="no training run meanwhile")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 200 or not 1 <= args.seconds <= 600 or not 0 <= args.idle_sessions <= 5000:
        parser.error("keep it bounded: 1-200 clients, 1-600 seconds, 0-5000 idle sessions")
    if set(args.mix) - set(MIX) or not args.mix:
        parser.error(f"--mix takes {', '.join(MIX)}, comma-separated")
    if args.session != "per-visitor" and args.driver != "async":
        parser.error("--session none|both needs --driver async")
    runs = [run(argparse.Namespace(**{**vars(args), "session": way}))
            for way in (("per-visitor", "none") if args.session == "both" else (args.session,))]
    for result in runs:
        print(report(result))
        if args.json:
            print(json.dumps(result))
    if len(runs) == 2:
        with_one, without = runs
        print(f"without a session / with one: CPU a request "
              f"{ratio(without, with_one, 'studio_cpu_ms_per_request')}x, translations/s "
              f"{ratio(without, with_one, 'translations_per_s')}x, p95 {ratio(without, with_one, 'p95_s')}x")


def ratio(a: dict, b: dict, key: str) -> str:
    return f"{a[key] / b[key]:.2f}" if b.get(key) else "n/a"


if __name__ == "__main__":
    main()
