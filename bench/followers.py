"""Followers (issue 64): N students' pages following a lecturer, and a visitor translating meanwhile.

    python bench/followers.py [--followers 200] [--seconds 30] [--move-every 4] [--model multi30k-de-en-small]
                              [--url http://127.0.0.1:7860/ --code CODE --key KEY] [--json]

Starts `python -m studio --public --class` on 127.0.0.1 (a free port; nothing else is contacted) and reads the
class's code and key from what it prints (or uses a running studio's, given --url, --code and --key). Every
follower polls GET /class/CODE/state once a second (each its own phase), as static/class_follow.js does; the
lecturer moves the class one step every --move-every seconds (POST /class/CODE/step, as Next does); a visitor
translates back to back through /translate (beam 4) the whole time. Prints the follow latency (from the
lecturer's move to a follower's first poll that shows it) p50/p95/max over every follower and move, polls and
errors, the visitor's translations and their p50/p95, and the studio's CPU-seconds and the machine's load.

What it measures is the class reaching each page (the ~1 s poll plus its answer), not a page's reload of the
step's view, whose model work the view's own caches and batching bound. Goal (issue 64): 200 followers on 2 cores,
follow p95 within 2 s, 0 errors, the visitor's p95 within 1.5 s.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import cpu_seconds, percentile  # noqa: E402
from bench.serving import free_port, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 1.0  # studio.links.class_panel.FOLLOW_POLL_MS
SENTENCE = "Zwei Hunde spielen im Schnee."


@dataclass
class Tally:
    moves: list[tuple[int, float]] = field(default_factory=list)  # (step, when the lecturer moved)
    latencies: list[float] = field(default_factory=list)
    polls: int = 0
    errors: int = 0
    translations: list[float] = field(default_factory=list)
    translate_errors: int = 0


def start_studio(port: int) -> tuple[subprocess.Popen, str, str]:
    """`python -m studio --public --class` on port: the process, the class's code and key (from its output)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "studio", "--port", str(port), "--public", "--class"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        found = re.search(r"#class=(\w+)&key=(\S+)", line)
        if found:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # the pipe keeps draining
            return proc, found.group(1), found.group(2)
    raise RuntimeError("the studio printed no class:\n" + "".join(lines))


async def follower(client: httpx.AsyncClient, url: str, tally: Tally, deadline: float) -> None:
    """One page: poll the state each second; each move's latency is the first poll that shows its step."""
    await asyncio.sleep(random.uniform(0, POLL_S))
    seen = None
    while time.monotonic() < deadline:
        try:
            answer = await client.get(url)
            answer.raise_for_status()
            step = answer.json()["step"]
            tally.polls += 1
        except (httpx.HTTPError, ValueError, KeyError):
            tally.errors += 1
            step = seen
        now = time.monotonic()
        if seen is not None and step != seen:
            moved = next((at for s, at in reversed(tally.moves) if s == step), None)
            if moved is not None:
                tally.latencies.append(now - moved)
        seen = step
        await asyncio.sleep(POLL_S)


async def lecturer(client: httpx.AsyncClient, base: str, key: str, tally: Tally, every: float,
                   deadline: float) -> None:
    """The lecturer's Next every `every` seconds, round the lesson."""
    now = (await client.get(f"{base}/state")).json()
    step, steps = now["step"], now["steps"]
    while time.monotonic() + every < deadline:
        await asyncio.sleep(every)
        step = step % steps + 1
        tally.moves.append((step, time.monotonic()))  # before the call: the latency counts the move's own
        answer = await client.post(f"{base}/step", json={"key": key, "step": step})
        answer.raise_for_status()


def visitor(base: str, model: str, tally: Tally, deadline: float) -> None:
    """A visitor translating back to back (gradio_client: its own session, as a page)."""
    from gradio_client import Client

    client = Client(base, verbose=False)
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            client.predict(model, SENTENCE, "beam", 4, 0.6, 50, 4, 0.8, 0, 0.9, "", api_name="/translate")
            tally.translations.append(time.monotonic() - start)
        except Exception:  # noqa: BLE001 - a failed call is counted, whatever gradio_client raises
            tally.translate_errors += 1


async def followers(base: str, code: str, key: str, args: argparse.Namespace, tally: Tally) -> None:
    deadline = time.monotonic() + args.seconds
    limits = httpx.Limits(max_connections=args.followers + 4, max_keepalive_connections=args.followers + 4)
    async with httpx.AsyncClient(timeout=10.0, limits=limits) as client:
        tasks = [follower(client, f"{base}class/{code}/state", tally, deadline) for _ in range(args.followers)]
        tasks.append(lecturer(client, f"{base}class/{code}", key, tally, args.move_every, deadline))
        await asyncio.gather(*tasks)


def run(args: argparse.Namespace) -> dict:
    proc = None
    if args.url:
        base, code, key = args.url.rstrip("/") + "/", args.code, args.key
    else:
        port = free_port()
        proc, code, key = start_studio(port)
        base = f"http://127.0.0.1:{port}/"
        wait_for(base, proc, timeout=180.0)
    try:
        tally = Tally()
        before = cpu_seconds(proc.pid) if proc else None
        deadline = time.monotonic() + args.seconds
        translating = threading.Thread(target=visitor, args=(base, args.model, tally, deadline), daemon=True)
        translating.start()
        asyncio.run(followers(base, code, key, args, tally))
        translating.join(timeout=60)
        spent = cpu_seconds(proc.pid) - before if proc else None
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=20)
    return {"followers": args.followers, "seconds": args.seconds, "moves": len(tally.moves), "polls": tally.polls,
            "errors": tally.errors, "follow_p50_s": percentile(tally.latencies, 0.5),
            "follow_p95_s": percentile(tally.latencies, 0.95),
            "follow_max_s": max(tally.latencies, default=float("nan")), "follows": len(tally.latencies),
            "translations": len(tally.translations), "translate_errors": tally.translate_errors,
            "translate_p50_s": percentile(tally.translations, 0.5),
            "translate_p95_s": percentile(tally.translations, 0.95), "studio_cpu_s": spent,
            "load_average": os.getloadavg()}


def report(r: dict) -> str:
    cpu = "" if r["studio_cpu_s"] is None else f", the studio's CPU {r['studio_cpu_s']:.1f} s"
    return (f"{r['followers']} followers, {r['seconds']:g} s, {r['moves']} moves: {r['polls']} polls, "
            f"{r['errors']} errors\n"
            f"  follow latency (move -> a follower's poll shows it), {r['follows']} follows: "
            f"p50 {r['follow_p50_s']:.2f} s, p95 {r['follow_p95_s']:.2f} s, max {r['follow_max_s']:.2f} s\n"
            f"  a visitor translating meanwhile: {r['translations']} translations ({r['translate_errors']} errors), "
            f"p50 {r['translate_p50_s']:.2f} s, p95 {r['translate_p95_s']:.2f} s\n"
            f"  {cpu.lstrip(', ')}; load average {', '.join(f'{x:.2f}' for x in r['load_average'])}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--move-every", type=float, default=4.0, help="seconds between the lecturer's moves")
    parser.add_argument("--model", default="multi30k-de-en-small", help="the model the visitor translates with")
    parser.add_argument("--url", help="a running studio (with --code and --key of its class) instead of a new one")
    parser.add_argument("--code")
    parser.add_argument("--key")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.url and not (args.code and args.key):
        parser.error("--url needs the class's --code and --key (python -m studio --class prints them)")
    result = run(args)
    print(json.dumps(result) if args.json else report(result))


if __name__ == "__main__":
    main()
