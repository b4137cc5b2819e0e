"""Test helpers: Trainers on the synthetic tasks, as the trainer, CUDA and DDP tests build them."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
import torch.distributed as dist

from core.bundle import new_bundle
from core.data.batching import encode_pairs
from core.data.tasks import make_task
from core.training.trainer import TrainConfig, Trainer


def make_trainer(steps: int = 10, seed: int = 0, bundle=None, dropout: float = 0.1, **overrides) -> Trainer:
    """The tiny preset learning `copy` (300 pairs), on the CPU in fp32 unless overrides say otherwise."""
    corpus = make_task("copy", seed=0, n_train=300, n_valid=20, n_test=20)
    if bundle is None:
        torch.manual_seed(seed)
        bundle = new_bundle(corpus.train, "tiny", vocab_size=100, tokenizer_kind="word", dropout=dropout)
    examples, _ = encode_pairs(corpus.train, bundle.tokenizer, bundle.model.config.max_len)
    settings = dict(max_steps=steps, max_tokens=256, warmup=20, lr_factor=0.5, seed=seed, device="cpu", amp="off")
    config = TrainConfig(**{**settings, **overrides})
    valid, _ = encode_pairs(corpus.valid, bundle.tokenizer, bundle.model.config.max_len)
    return Trainer(bundle, examples, config, valid_pairs=corpus.valid, valid=valid)


def losses(trainer: Trainer, n: int) -> list[float]:
    return [trainer.step().loss for _ in range(n)]


def ddp_trainer(device: str, amp: str, **overrides) -> Trainer:
    """Three steps of `reverse` for a DDP rank; accum 2: the first micro-batch of each step skips the
    all-reduce (no_sync), the second syncs. The caller seeds the initial weights; overrides: TrainConfig's."""
    corpus = make_task("reverse", seed=0, n_train=200, n_valid=10, n_test=10)
    bundle = new_bundle(corpus.train, "tiny", vocab_size=100, tokenizer_kind="word")
    examples, _ = encode_pairs(corpus.train, bundle.tokenizer, 256)
    return Trainer(bundle, examples, TrainConfig(max_steps=3, max_tokens=200, warmup=5, device=device, amp=amp,
                                                 seed=0, accum=2, **overrides))


def weights(trainer: Trainer) -> torch.Tensor:
    """Every parameter of the trainer's model, flattened into one CPU tensor."""
    return torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).cpu()


@contextlib.contextmanager
def process_group(backend: str, rank: int, world: int, port: int) -> Iterator[None]:
    """This spawned process as `rank` of a torch.distributed group of `world` on this machine: nccl on GPU `rank`,
    gloo with one CPU thread (the ranks share the cores)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "nccl":
        torch.cuda.set_device(rank)
    else:
        torch.set_num_threads(1)
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()
