"""The GPU path's tricks (core/training/acceleration.py, TokenBatcher's buckets), each against the plain way on
the CPU: bucketed batches give the loss and gradients of unbucketed ones and train alike; figures read
back every N steps are the per-step figures' means, with the same weights; an update skipped on the
device leaves the weights as a skipped update on the host does."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.multiprocessing as mp

from bench.serving import free_port
from core.data.batching import Example, TokenBatcher, pad_batch
from core.training.acceleration import FigureWindow, step_unless
from core.training.loss import Objective
from core.training.trainer import TrainConfig, TrainingStopped
from tests.helpers.trainers import ddp_trainer, losses, make_trainer, process_group, weights


def _examples(n: int = 60) -> list[Example]:
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, 30, (n, 2), generator=gen).tolist()
    return [Example([4 + (i + j) % 25 for j in range(s)] + [2], [1] + [4 + (i * j) % 25 for j in range(t)] + [2])
            for i, (s, t) in enumerate(lengths)]


def test_bucketed_batches_have_few_shapes_and_keep_every_example_once():
    examples = _examples(300)
    batcher = TokenBatcher(examples, max_tokens=256, bucket=8)
    batches = list(batcher)
    shapes = {(b.src.shape, b.tgt_in.shape) for b in batches}
    assert len(shapes) <= 32 // 8 + 1  # lengths up to 31 tokens: widths 8, 16, 24, 32
    for b in batches:
        rows, width = b.src.shape
        assert width % 8 == 0 and b.tgt_in.shape == (rows, width) and rows == 256 // width
        assert rows * width <= 256
    assert sum(b.n_tgt_tokens for b in batches) == sum(len(e.tgt) - 1 for e in examples)
    plain = TokenBatcher(examples, max_tokens=256)
    assert len({(b.src.shape, b.tgt_in.shape) for b in plain}) > 3 * len(shapes)


def test_a_bucketed_batch_on_the_grid_has_the_loss_and_gradients_of_the_plain_one():
    """The grid's padding positions and filler rows ([EOS] -> [BOS]) are masked or not scored: against the
    real tokens alone (packing), they change nothing but rounding."""
    torch.manual_seed(0)
    trainer = make_trainer(dropout=0.0)
    examples = _examples(12)
    results = []
    for batch, grid in ((pad_batch(examples), False), (pad_batch(examples, width=48, rows=20), True)):
        trainer.model.zero_grad()
        loss, nll, hits = Objective(trainer.model, 0.1, grid=grid)(batch.src, batch.tgt_in, batch.tgt_out)
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters()])
        results.append((loss.item(), nll.item(), hits.item(), batch.n_tgt_tokens, grads))
    (loss, nll, hits, n, grads), (b_loss, b_nll, b_hits, b_n, b_grads) = results
    assert (b_loss, b_nll) == pytest.approx((loss, nll), rel=1e-5) and (b_hits, b_n) == (hits, n)
    assert (b_grads - grads).norm() < 1e-5 * grads.norm()  # summation order: ~1e-7 relative, measured


def test_the_grid_forward_reads_nothing_back():
    """One graph for torch.compile (fullgraph: no break), which a read-back from the device (.item(), a
    data-dependent shape such as packing's) would break: the GPU's queue of kernels never waits for the host."""
    trainer = make_trainer(dropout=0.0)
    batch = pad_batch(_examples(6), width=32, rows=8)
    torch._dynamo.reset()
    traced = torch.compile(trainer.model.hidden_grid, fullgraph=True, backend="eager", dynamic=False)
    assert torch.allclose(traced(batch.src, batch.tgt_in), trainer.model.hidden_grid(batch.src, batch.tgt_in))


def test_bucketed_training_on_the_grid_follows_the_plain_run_step_by_step():
    """bucket=1 cuts the data as the plain batcher does (widths are not rounded up), but fills the rows up and
    trains on the grid: the whole bucketed path, with the plain run's batches, gives its losses."""
    plain = losses(make_trainer(15, dropout=0.0), 15)
    trainer = make_trainer(15, dropout=0.0, bucket=1)
    assert trainer.objective.grid
    assert losses(trainer, 15) == pytest.approx(plain, rel=1e-4)
    assert plain[-1] < 0.8 * plain[0]


def _run(trainer) -> list:
    events = []
    trainer.run(events.append)
    return events


def test_figures_read_back_every_n_steps_are_the_means_of_the_steps_and_the_weights_the_same():
    every = _run(make_trainer(12, readback_every=1))
    plain = make_trainer(12)
    plain.run()
    deferred = make_trainer(12, readback_every=5)
    events = _run(deferred)
    assert torch.equal(weights(deferred), weights(plain))
    assert [e.step for e in events if e.measured] == [5, 10, 12]  # and the last step
    assert all(math.isnan(e.loss) for e in events[:4])  # nothing read back yet
    assert events[6].loss == events[4].loss and not events[6].measured  # the last read-back's figures
    # The plain events' per-token means, weighted by their batches' target tokens, over steps 6-10.
    window = every[5:10]
    tokens = [_target_tokens(make_trainer(12), i) for i in range(5, 10)]
    mean = sum(e.loss * t for e, t in zip(window, tokens)) / sum(tokens)
    assert events[9].loss == pytest.approx(mean, rel=1e-9)
    assert events[9].accuracy == pytest.approx(sum(e.accuracy * t for e, t in zip(window, tokens)) / sum(tokens))
    assert events[9].grad_norm == pytest.approx(sum(e.grad_norm for e in window) / 5)


def _target_tokens(trainer, index: int) -> int:
    """The target tokens of the trainer's batch number index (counted from 0)."""
    batches = trainer.batcher.batches_forever()
    for _ in range(index):
        next(batches)
    return next(batches).n_tgt_tokens


def test_an_update_skipped_on_the_device_changes_nothing():
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.Adam([param], lr=0.1, fused=True)
    param.grad = torch.ones(3)
    step_unless(optimizer, torch.tensor(True))
    assert torch.equal(param.detach(), torch.ones(3)) and not hasattr(optimizer, "found_inf")
    step_unless(optimizer, torch.tensor(False))
    assert param.detach().tolist() == pytest.approx([0.9] * 3)


def test_non_finite_steps_are_skipped_counted_and_stop_the_run_in_the_deferred_path():
    """As the plain path (tests/test_trainer.py), but found out at the read-back: NaN activations with finite
    weights, every update skipped on the device, and the run stopped at the read-back after the third."""
    trainer = make_trainer(20, readback_every=4, max_bad_steps=3)
    trainer.step()
    trainer.model.src_embed.register_forward_hook(lambda module, args, out: out * float("nan"))
    before = weights(trainer).clone()
    with warnings.catch_warnings(record=True) as caught, pytest.raises(TrainingStopped, match="3 steps in a row"):
        warnings.simplefilter("always")
        for _ in range(8):
            trainer.step()
    assert trainer.step_count == 4 and "steps 1-4: 3 with a non-finite loss" in str(caught[0].message)
    assert torch.equal(weights(trainer), before)


def test_fp16_overflows_in_the_deferred_path_are_the_scalers_business():
    trainer = make_trainer(12, max_bad_steps=3, amp="fp16", readback_every=6)
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 28)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = [trainer.step() for _ in range(12)]
    assert events[5].skipped and math.isfinite(events[5].loss) and trainer.bad_steps == 0
    assert not any("non-finite" in str(w.message) for w in caught)


def test_the_window_counts_runs_of_bad_steps_across_read_backs():
    window = FigureWindow(torch.device("cpu"))
    ok, nan = torch.tensor([2.0, 1.0, 3.0]), torch.tensor([float("nan"), 1.0, 0.0])
    for sums in (ok, nan, nan):
        window.add(sums, torch.tensor(1.0), 4, 0.5, None)
    first = window.read()
    assert (first.steps, first.skipped, first.bad_run, first.loss, first.accuracy) == (3, 2, 2, 0.5, 0.75)
    window.add(nan, torch.tensor(1.0), 4, 0.5, None)
    assert window.read().bad_run == 3  # the run went on over the read-back
    window.add(ok, torch.tensor(float("inf")), 4, 0.5, torch.tensor(1024.0))  # fp16: an ordinary overflow
    figures = window.read()
    assert (figures.skipped, figures.bad, figures.loss, math.isnan(figures.grad_norm)) == (1, 0, 0.5, True)


def test_cuda_graphs_need_compile_and_buckets():
    with pytest.raises(ValueError, match="cuda_graphs needs compile and a bucket"):
        TrainConfig(cuda_graphs=True, compile=True)
    with pytest.raises(ValueError, match="readback_every must be > 0"):
        TrainConfig(readback_every=0)
    TrainConfig(cuda_graphs=True, compile=True, bucket=16)


def _gloo_worker(rank: int, world: int, port: int, results) -> None:
    with process_group("gloo", rank, world, port):
        torch.manual_seed(rank)  # different initial weights per rank: DDP must broadcast rank 0's
        trainer = ddp_trainer("cpu", "off", bucket=8, readback_every=2)
        events = []
        trainer.run(events.append)
        results[rank] = (weights(trainer), [e.measured for e in events], events[-1].loss)


@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_the_deferred_grid_path_under_ddp_keeps_the_ranks_alike():
    """Two gloo ranks, bucketed batches on the grid, figures read back every 2 steps (and at the last, 3):
    the token count all-reduced on the device, the skip decided alike, the same weights at the end."""
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_gloo_worker, args=(2, free_port(), results), nprocs=2, join=True)
        (w0, measured, loss), (w1, _, _) = results[0], results[1]
    assert torch.equal(w0, w1) and measured == [False, True, True] and math.isfinite(loss)


def test_a_resume_in_the_deferred_path_goes_on_counting_non_finite_steps(tmp_path):
    """As tests/test_trainer.py's plain-path test: saved after two NaN steps in a row (read back at step 2),
    a resumed run gives up at its first read-back after the third."""
    from core.checkpoint import load_checkpoint, load_trainer_state

    def poisoned(trainer):  # NaN activations, finite weights: every step is skipped
        trainer.model.src_embed.register_forward_hook(lambda module, args, out: out * float("nan"))
        return trainer

    trainer = poisoned(make_trainer(max_bad_steps=3, readback_every=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.step()
        assert trainer.step().skipped and trainer.bad_steps == 2
        trainer.save(tmp_path / "ckpt")
        resumed = poisoned(make_trainer(bundle=load_checkpoint(tmp_path / "ckpt"), max_bad_steps=3, readback_every=2))
        resumed.load_state_dict(load_trainer_state(tmp_path / "ckpt"))
        resumed.step()
        with pytest.raises(TrainingStopped, match="4 steps in a row"):
            resumed.step()
