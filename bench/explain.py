"""Explaining one translation on the shipped model: how long the studio waits for each view of issue 41.

    python bench/explain.py [--runs 7] [--threads 2] [--checkpoint checkpoints/multi30k-de-en-small]

On a 20-token pair (20 source tokens with <eos>, 20 target tokens with <eos>), times core.score, one
query's core.attention_arithmetic, core.attribution by gradient x input and by integrated gradients
(32 steps): the median of --runs runs after one warm-up run (min and max beside it). Targets on 2 CPU
cores: score <= 150 ms, arithmetic <= 150 ms, gradient x input <= 300 ms, integrated gradients <= 2 s.
Prints the CPU, torch's threads and the load average before and after, since a shared machine's other
jobs slow every figure; the CPU time the process used is printed beside the wall time for that reason.
On a machine busier than its cores, OpenMP's threads spin while they wait for each other and two threads
run many times slower than one: OMP_WAIT_POLICY=PASSIVE (set before the run) makes them sleep instead.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

import core  # noqa: E402

SOURCE = "Zwei junge Männer in roten Hemden spielen auf einer grünen Wiese mit einem großen roten Ball und einem Hund."
TARGET = "Two young men in red shirts are playing on a green field with a red ball and a dog."
TARGETS = {"score": 0.150, "attention arithmetic": 0.150, "grad x input": 0.300, "integrated gradients (32)": 2.0}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(work, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run, after one warm-up run."""
    work()
    wall, cpu = [], []
    for _ in range(runs):
        started, used = time.perf_counter(), time.process_time()
        work()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "checkpoints" / "multi30k-de-en-small")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = core.load_checkpoint(args.checkpoint)
    [scored] = core.score(bundle, [SOURCE], [TARGET])
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} threads; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}; load average {os.getloadavg()[0]:.2f} "
          f"(1 min), {os.getloadavg()[1]:.2f} (5 min)")
    print(f"{bundle.name}: {len(scored.source_tokens)} source tokens, {len(scored.tokens)} target tokens "
          f"(<eos> included); median of {args.runs} runs after a warm-up run")
    query = len(scored.tokens) // 2
    work = {
        "score": lambda: core.score(bundle, [SOURCE], [TARGET]),
        "attention arithmetic": lambda: core.attention_arithmetic(bundle, SOURCE, TARGET, "cross", 2, 1, query),
        "grad x input": lambda: core.attribution(bundle, SOURCE, TARGET, "grad_x_input"),
        "integrated gradients (32)": lambda: core.attribution(bundle, SOURCE, TARGET, "integrated_gradients", 32),
    }
    for name, run in work.items():
        wall, cpu = timed(run, args.runs)
        median, target = statistics.median(wall), TARGETS[name]
        verdict = "ok" if median <= target else "MISSED"
        print(f"{name:>26}: {median * 1000:7.0f} ms (min {min(wall) * 1000:.0f}, max {max(wall) * 1000:.0f}; "
              f"CPU {statistics.median(cpu) * 1000:.0f} ms)  target <= {target * 1000:.0f} ms: {verdict}")
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
