"""The CUDA paths: bf16 and fp16 autocast, torch.compile, DistributedDataParallel over NCCL,
decoding on the GPU, and a GPU-trained checkpoint opened on a machine without one. They skip
without CUDA (CI never has a GPU); run them on a GPU machine with `python -m pytest tests/test_cuda.py`."""
from __future__ import annotations

import math
import os
import random

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import train_cli
from _models import reverse_task, tiny_bundle
from _trainers import ddp_trainer, losses, make_trainer
from bench.serving import free_port
from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint
from core.translation import translate, translate_detailed
from core.trainer import Trainer

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_half_precision_autocast_keeps_the_loss_curve(amp):
    """Same start, batches and dropout masks as fp32; only the precision of the products differs.
    fp16 also scales the loss (GradScaler), which must leave the update the same."""
    fp32 = losses(make_trainer(40, device="cuda"), 40)
    trainer = make_trainer(40, device="cuda", amp=amp)
    half = losses(trainer, 40)
    gap = max(abs(a - b) / a for a, b in zip(fp32, half))
    assert fp32[-1] < 0.8 * fp32[0]
    assert 1e-4 < gap < 0.03  # the half precision was in effect (more than fp32's run-to-run noise)
    assert trainer.scaler.is_enabled() == (amp == "fp16")


def test_auto_precision_is_bf16_on_a_gpu_that_has_it():
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    assert make_trainer(device="cuda", amp="auto").amp_dtype == torch.bfloat16


def test_the_compiled_step_learns_as_the_eager_one():
    """torch.compile fuses the step's kernels: the same arithmetic up to rounding (no dropout, whose
    masks the compiled graph draws from its own generator). Batches vary in shape, so it also
    recompiles or goes dynamic without failing."""
    eager = losses(make_trainer(12, dropout=0.0, device="cuda"), 12)
    compiled = losses(make_trainer(12, dropout=0.0, device="cuda", compile=True, amp="bf16"), 12)
    eager_bf16 = losses(make_trainer(12, dropout=0.0, device="cuda", amp="bf16"), 12)
    assert eager[-1] < 0.9 * eager[0]
    assert compiled == pytest.approx(eager_bf16, rel=0.02)


def weights(trainer: Trainer) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in trainer.model.parameters()]).cpu()


def _nccl_worker(rank: int, world: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    try:
        torch.manual_seed(rank)  # different initial weights per rank: DDP must broadcast rank 0's
        trainer = ddp_trainer(f"cuda:{rank}", "bf16")
        assert trainer._ddp is not None
        start, losses = weights(trainer), []
        trainer.run(lambda event: losses.append(event.loss))
        results[rank] = (start, weights(trainer), losses)
    finally:
        dist.destroy_process_group()


def test_ddp_over_nccl():
    """NCCL ranks, one per GPU (at most two; two sharing the one GPU of an H100 machine failed). Two end with the
    same weights. A single rank checks less (its all-reduce sums one gradient): NCCL's start, DDP's
    broadcast and hooks, and that they leave training as it is without DDP."""
    world = min(2, torch.cuda.device_count())
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_nccl_worker, args=(world, free_port(), results), nprocs=world, join=True)
        results = dict(results)
    start, end, losses = results[0]
    assert not torch.equal(start, end)  # it trained
    if world == 2:
        assert torch.equal(end, results[1][1])
    else:
        torch.manual_seed(0)
        plain, plain_losses = ddp_trainer("cuda:0", "bf16"), []
        plain.run(lambda event: plain_losses.append(event.loss))
        # GPU atomics (embedding gradients) may differ in the last bits between two runs, which
        # Adam can turn into a visible step for a weight whose gradient is ~0: compare the losses.
        assert len(losses) == 3
        assert losses == pytest.approx(plain_losses, rel=1e-4)


def test_decoding_on_the_gpu_gives_the_cpus_translations():
    """Greedy and beam search on CUDA and on the CPU, same weights in fp32: the same outputs
    (the model's choices are far from ties, so rounding differences in the kernels do not show)."""
    cpu = tiny_bundle()
    rng = random.Random(1)
    sources = [reverse_task(rng)[0] for _ in range(40)]
    gpu_model = type(cpu.model)(cpu.model.config)
    gpu_model.load_state_dict(cpu.model.state_dict())
    gpu = ModelBundle(gpu_model.cuda().eval(), cpu.tokenizer, cpu.info, None)
    for method in ("greedy", "beam"):
        on_cpu = translate(cpu, sources, method=method)
        assert translate(gpu, sources, method=method) == on_cpu
        assert sum(o == " ".join(reversed(s.split())) for o, s in zip(on_cpu, sources)) >= 36


def test_sampling_on_the_gpu_is_seeded():
    bundle = tiny_bundle()
    model = type(bundle.model)(bundle.model.config)
    model.load_state_dict(bundle.model.state_dict())
    gpu = ModelBundle(model.cuda().eval(), bundle.tokenizer, bundle.info, None)
    draw = [[t.text for t in translate_detailed(gpu, ["a b c d e"] * 8, method="sample", seed=seed,
                                                temperature=1.5, top_p=1.0)] for seed in (3, 3, 4)]
    assert draw[0] == draw[1] != draw[2]


def test_a_run_trained_on_the_gpu_opens_and_translates_on_a_cpu(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_cli.main(["train", "--preset", "tiny", "--data", "synthetic:copy", "--max-steps", "30",
                           "--max-tokens", "600", "--warmup", "10", "--amp", "fp16", "--device", "cuda",
                           "--compile", "--eval-every", "30", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "device cuda" in printed and "amp fp16" in printed
    bundle = load_checkpoint(out / "final")
    assert {p.device.type for p in bundle.model.parameters()} == {"cpu"}
    assert all(math.isfinite(p.float().sum().item()) for p in bundle.model.parameters())
    assert len(translate(bundle, ["a b c d"])) == 1
