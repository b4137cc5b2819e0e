"""The CUDA paths: bf16 and fp16 autocast, torch.compile, DistributedDataParallel over NCCL,
decoding on the GPU, and a GPU-trained checkpoint opened on a machine without one. They skip
without CUDA (CI never has a GPU); run them on a GPU machine with `python -m pytest tests/test_cuda.py`."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

import train_cli
from bench.serving import free_port
from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint, load_trainer_state
from core.data.batching import TokenBatcher
from core.inference.translation import translate, translate_detailed
from core.training.trainer import Trainer
from tests.helpers.models import reverse_sources, tiny_bundle
from tests.helpers.trainers import ddp_trainer, losses, make_trainer, process_group, weights

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


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


def _nccl_worker(rank: int, world: int, port: int, results) -> None:
    with process_group("nccl", rank, world, port):
        torch.manual_seed(rank)  # different initial weights per rank: DDP must broadcast rank 0's
        trainer = ddp_trainer(f"cuda:{rank}", "bf16")
        assert trainer._ddp is not None
        start, losses = weights(trainer), []
        trainer.run(lambda event: losses.append(event.loss))
        results[rank] = (start, weights(trainer), losses)


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
    sources = reverse_sources(40, seed=1)
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


# ----- the full-speed path (core/training/acceleration.py): grid batches, no host sync, compile, CUDA graphs ----------
def read_back_losses(trainer: Trainer, n: int) -> list[float]:
    """The losses of n steps' read-backs (every readback_every steps: the means of their window)."""
    return [e.loss for e in (trainer.step() for _ in range(n)) if e.measured]


def test_a_grid_step_never_waits_for_the_gpu():
    """Between two read-backs a step queues its work and returns: CUDA's sync debug mode turns any wait for
    the device (an .item(), a blocking copy, a data-dependent shape) into an error naming where it is."""
    trainer = make_trainer(20, device="cuda", amp="bf16", bucket=8, readback_every=10)
    for _ in range(10):  # the first window: allocations, cuBLAS's choices, the first read-back
        trainer.step()
    torch.cuda.set_sync_debug_mode("error")
    try:
        events = [trainer.step() for _ in range(9)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert not any(e.measured for e in events) and trainer.step().measured


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_the_grid_path_learns_as_the_plain_one_on_the_gpu(amp):
    """bucket=1 keeps the plain path's batches (tests/test_acceleration.py): the same curve, read back every 4."""
    plain = losses(make_trainer(12, dropout=0.0, device="cuda", amp=amp), 12)
    grid = read_back_losses(make_trainer(12, dropout=0.0, device="cuda", amp=amp, bucket=1, readback_every=4), 12)
    means = [sum(plain[i:i + 4]) / 4 for i in (0, 4, 8)]  # batches of about equal tokens: near the window's mean
    assert grid == pytest.approx(means, rel=0.05) and grid[-1] < 0.9 * grid[0]


def test_the_compiled_grid_step_does_not_recompile_per_batch():
    """Bucketed batches of several shapes through one compiled graph with symbolic sizes: once each shape has
    come by (a first one may recompile, if it happened to make two sizes equal), later batches compile
    nothing more; and the curve is the eager one's."""
    import torch._dynamo.utils as dynamo_utils

    options = dict(dropout=0.0, device="cuda", amp="bf16", bucket=2, readback_every=5)
    eager, compiled = make_trainer(40, **options), make_trainer(40, compile=True, **options)
    twin = TokenBatcher(compiled.batcher.examples, compiled.config.max_tokens, seed=0, bucket=2).batches_forever()
    shapes = [next(twin).src.shape for _ in range(40)]
    seen = max(shapes.index(shape) for shape in set(shapes)) + 1  # steps until every shape has come by
    assert len(set(shapes)) >= 3 and seen <= 25
    curve = [compiled.step() for _ in range(seen)]
    frames = dynamo_utils.counters["frames"]["ok"]
    curve += [compiled.step() for _ in range(40 - seen)]
    assert dynamo_utils.counters["frames"]["ok"] == frames
    assert [e.loss for e in curve if e.measured] == pytest.approx(read_back_losses(eager, 40), rel=0.02)


def test_cuda_graphs_replay_the_compiled_step():
    options = dict(dropout=0.0, device="cuda", amp="bf16", bucket=8, readback_every=5)
    eager = read_back_losses(make_trainer(20, **options), 20)
    replayed = read_back_losses(make_trainer(20, compile=True, cuda_graphs=True, **options), 20)
    assert len(eager) == 4 and replayed == pytest.approx(eager, rel=0.02)


def test_a_grid_run_saved_on_the_gpu_resumes_exactly(tmp_path):
    """Saved between two read-backs (its window's figures are lost, nothing else): the weights of a run
    resumed from step 6 are those of the run that went on."""
    options = dict(device="cuda", amp="bf16", bucket=8, readback_every=4)
    straight = make_trainer(10, **options)
    for _ in range(10):
        straight.step()
    first = make_trainer(10, **options)
    for _ in range(6):
        first.step()
    first.save(tmp_path / "ckpt")
    bundle = load_checkpoint(tmp_path / "ckpt")
    bundle.model.train()
    resumed = make_trainer(10, bundle=bundle, **options)
    resumed.load_state_dict(load_trainer_state(tmp_path / "ckpt"))
    for _ in range(4):
        resumed.step()
    assert torch.allclose(weights(resumed), weights(straight), rtol=1e-3, atol=1e-5)  # GPU atomics' last bits


def test_the_fast_decoders_on_the_gpu_give_the_naive_decoders_outputs():
    """Batched, cached greedy and beam search on the GPU against bench/decode.py's naive reference (one
    sentence, the whole prefix each step), on the GPU too."""
    from bench.decode import _naive, naive_beam, naive_greedy
    from core.inference.options import DecodeOptions

    cpu = tiny_bundle()
    model = type(cpu.model)(cpu.model.config)
    model.load_state_dict(cpu.model.state_dict())
    gpu = ModelBundle(model.cuda().eval(), cpu.tokenizer, cpu.info, None)
    sources = reverse_sources(12, seed=2)
    for method, naive in (("greedy", naive_greedy), ("beam", naive_beam)):
        fast = [r.ids for r in translate_detailed(gpu, sources, method=method)]
        options = DecodeOptions(method=method)
        with torch.no_grad():
            slow = [_naive(naive, model, cpu.tokenizer, s, options) for s in sources]
        assert fast == slow


def test_the_studio_trains_on_the_gpu_and_says_so(tmp_path):
    """python -m studio on a CUDA machine: the Train tab's job (studio/train/job.py) picks the GPU by itself
    (Settings.device "auto"), names it, and hands out CPU snapshots while training there."""
    from studio.server.registry import ModelRegistry
    from studio.train import setup as run_setup
    from studio.train.job import Settings, TrainingJob

    assert run_setup.device_line("auto").startswith("GPU: ") and "(CUDA)" in run_setup.device_line("auto")
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints")
    job.start(Settings(max_steps=30, max_tokens=256, warmup=10, eval_every=10, attention_every=5))
    assert "on cuda" in job.view().message  # "Training live-numbers on cuda."
    assert job.wait(300)
    view = job.view()
    assert view.state == "finished" and view.step == 30, view.message
    assert view.facts["device"].startswith("cuda")
    assert len(view.evaluations) == 3 and len(view.frames) > 1
    assert {p.device.type for p in job.registry.get(view.settings.name).model.parameters()} == {"cpu"}


def test_torchrun_over_nccl_on_every_gpu(tmp_path):
    """train_cli under torchrun, a process per GPU (NCCL), on the grid path: one log and checkpoints (rank 0)."""
    gpus = torch.cuda.device_count()
    if gpus < 2:
        pytest.skip("one GPU: test_ddp_over_nccl covers a single NCCL rank")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={gpus}", "--standalone",
                           "train_cli.py", "train", "--data", "synthetic:copy", "--preset", "tiny", "--max-steps", "8",
                           "--max-tokens", "512", "--eval-every", "4", "--save-every", "4", "--amp", "bf16",
                           "--bucket", "8", "--readback-every", "4", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(f"{gpus} process(es)") == 1 and done.stdout.count("done: 8 steps") == 1
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [4, 8]
