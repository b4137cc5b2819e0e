"""Issue 5: DistributedDataParallel on CPU with two gloo processes — each rank trains on its
own batches, and after a few steps both hold identical weights."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp

from bench.serving import free_port
from core.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[3]


def worker(rank: int, world: int, port: int, results) -> None:
    from tests.helpers.trainers import ddp_trainer, process_group, weights

    with process_group("gloo", rank, world, port):
        torch.manual_seed(rank)  # different initial weights per rank: DDP must broadcast rank 0's
        trainer = ddp_trainer("cpu", "off")
        first = trainer._next_batches()[0].src.sum().item()
        trainer._batches = None
        trainer.batcher.load_state_dict({**trainer.batcher.state_dict(), "position": 0})
        trainer.run()
        results[rank] = (weights(trainer), first)


def test_two_gloo_ranks_end_with_identical_weights():
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(worker, args=(2, free_port(), results), nprocs=2, join=True)
    (w0, batch0), (w1, batch1) = results[0], results[1]
    assert batch0 != batch1  # each rank saw its own shard
    assert torch.equal(w0, w1)
    assert w0.abs().sum() > 0


def test_train_cli_under_torchrun_logs_and_saves_on_rank_0_only(tmp_path):
    """Two gloo processes through train_cli: one log, one metrics line per step, one set of checkpoints
    (every rank writing them would interleave the log and race on the folders)."""
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                           "train_cli.py", "train", "--data", "synthetic:copy", "--preset", "tiny", "--max-steps", "4",
                           "--max-tokens", "256", "--eval-every", "2", "--save-every", "2", "--amp", "off",
                           "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("2 process(es)") == 1 and done.stdout.count("done: 4 steps") == 1
    assert done.stdout.count("step 4: val_loss") == 1
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    assert sorted(p.name for p in out.iterdir()) == ["final", "metrics.jsonl", "run.json", "step-0000002",
                                                     "step-0000004"]
    assert load_checkpoint(out / "final").info["step"] == 4
