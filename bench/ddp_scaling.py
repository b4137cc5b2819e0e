"""Scaling of `train_cli.py train` under torchrun: target tokens/s with 1 process and with N (one per GPU,
NCCL; DistributedDataParallel, each rank on its own batches), the same options otherwise, read from each
run's metrics.jsonl (the median of the read-back steps after the first third, past compilation and
warm-up). Issue 45's third goal: when the lent machine has several GPUs, measure 1 vs N.

    python bench/ddp_scaling.py [--gpus N] [--steps 60] [--out gpu-out/ddp]   # paper-base, bf16, grid path
    python bench/ddp_scaling.py --cpu-smoke --out /tmp/x    # 1 vs 2 gloo processes, tiny, on the CPU
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from core.training.recipes import data_folder  # noqa: E402


def train_options(args: argparse.Namespace) -> list[str]:
    if args.cpu_smoke:
        return ["--data", "synthetic:copy", "--preset", "tiny", "--max-tokens", "256", "--amp", "off", "--limit", "400"]
    return ["--data", f"files:{data_folder('multi30k')}", "--src", "de", "--tgt", "en", "--preset", "paper-base",
            "--max-tokens", "25000", "--amp", "bf16", "--bucket", "16", "--readback-every", "5"]


def rate(args: argparse.Namespace, processes: int) -> float:
    """Median target tokens/s (all processes together) of one run with `processes` processes."""
    out = args.out / f"run-{processes}"
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}", "--standalone",
               str(ROOT / "train_cli.py"), "train", *train_options(args), "--max-steps", str(args.steps),
               "--eval-every", "0", "--save-every", str(args.steps), "--warmup", "4000", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{processes} process(es) failed:\n{done.stderr[-3000:]}")
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return statistics.median(e["tokens_per_s"] for e in events[len(events) // 3:])


def main(argv: list[str] | None = None) -> dict[int, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count(), help="N (default: every GPU)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("gpu-out") / "ddp", help="the runs' folders (replaced)")
    parser.add_argument("--cpu-smoke", action="store_true", help="1 vs 2 gloo processes, tiny preset, on the CPU")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.gpus, args.steps = 2, min(args.steps, 6)
    elif args.gpus < 2:
        sys.exit(f"scaling needs 2 or more GPUs; this machine has {torch.cuda.device_count()}")
    if args.out.exists():
        shutil.rmtree(args.out)
    rates = {n: rate(args, n) for n in (1, args.gpus)}
    one, many = rates[1], rates[args.gpus]
    print(f"train_cli under torchrun: 1 process {one:,.0f} target tok/s; {args.gpus} processes {many:,.0f} "
          f"({many / one:.2f}x, {many / one / args.gpus:.0%} of linear)")
    return rates


if __name__ == "__main__":
    main()
