"""Issue 5: DistributedDataParallel on CPU with two gloo processes — each rank trains on its
own batches, and after a few steps both hold identical weights."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench.serving import free_port


def worker(rank: int, world: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from _trainers import ddp_trainer

        torch.manual_seed(rank)  # different initial weights per rank: DDP must broadcast rank 0's
        trainer = ddp_trainer("cpu", "off")
        first = trainer._next_batches()[0].src.sum().item()
        trainer._batches = None
        trainer.batcher.load_state_dict({**trainer.batcher.state_dict(), "position": 0})
        trainer.run()
        flat = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
        results[rank] = (flat, first)
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_end_with_identical_weights():
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(worker, args=(2, free_port(), results), nprocs=2, join=True)
    (w0, batch0), (w1, batch1) = results[0], results[1]
    assert batch0 != batch1  # each rank saw its own shard
    assert torch.equal(w0, w1)
    assert w0.abs().sum() > 0
