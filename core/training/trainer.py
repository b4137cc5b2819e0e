"""Section 5: training. Adam(0.9, 0.98, 1e-9), the warm-up schedule of eq. 3, label
smoothing, batches of roughly equal-length sentences (section 5.1).

The Trainer is step-wise so that a UI thread can drive and watch it: ``step()`` runs one
optimizer step and returns a StepEvent; ``run()`` loops until done, honouring pause(),
resume() and stop() called from any thread; ``snapshot()`` hands out a consistent copy
of the weights while training goes on. Under torchrun it trains with
DistributedDataParallel, each rank on its own share of the batches.
"""
from __future__ import annotations

import contextlib
import copy
import math
import random
import threading
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn

from ..bundle import ModelBundle, resolve_device
from ..checkpoint import save_checkpoint
from ..data.batching import Batch, Example, TokenBatcher
from ..data.tasks import task_of
from ..inference.translation import translate_detailed
from .acceleration import (
    MIN_LOSS_SCALE,
    FigureWindow,
    compile_objective,
    make_optimizer,
    precision,
    resolve_amp,
    step_unless,
)
from .evaluation import evaluate_bleu, teacher_forced_argmax
from .keep_best import BestKeeper, check_keep_best
from .loss import Objective
from .schedule import learning_rate
from .train_config import TrainConfig

# A warm start's first steps, at rate 0: Adam's new moments gather their averages before any weight moves (a fresh
# Adam moves every weight by the full rate, whatever its gradient's size: warm-started at once, with only the ramp,
# tatoeba-de-en's loss went from 2.8 to 4.1 over 30 steps and its dev BLEU took ~1,500 steps to come back).
GATHER_STEPS = 50
# Then the steps over which the rate ramps from 0 back to the schedule's (Trainer.warm_start).
REWARM_STEPS = 100


@dataclass
class StepEvent:
    step: int
    loss: float  # label-smoothed, per target token
    perplexity: float  # exp(nll per token): the unsmoothed model's perplexity
    accuracy: float  # argmax == reference, over target tokens
    lr: float
    tokens_per_s: float  # target tokens
    grad_norm: float
    padding_ratio: float
    skipped: bool = False  # non-finite loss or gradients (fp16: the scaler overflowed): no update made
    tokens: int = 0  # this step's target tokens on this rank, known at every step (the figures may be a window's)
    # False: a step between read-backs (readback_every > 1), whose figures are the last read-back's (NaN before
    # the first); True: this step's figures, or with readback_every > 1 the means over the steps since the last.
    measured: bool = True
    validation: dict[str, Any] | None = None  # val_loss, val_perplexity, bleu, samples (after evaluation)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TrainingStopped(RuntimeError):
    """Raised when training cannot go on (e.g. the loss kept being NaN)."""


class Trainer:
    def __init__(self, bundle: ModelBundle, train: list[Example], config: TrainConfig,
                 valid_pairs: list[tuple[str, str]] | None = None, valid: list[Example] | None = None):
        """train and valid: encoded examples (core.data.batching.encode_pairs); valid_pairs: the validation
        sentences as text, for BLEU and sample translations."""
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        for what, examples in (("train", train), ("valid", valid or [])):
            bad = next((e for e in examples if not isinstance(e, Example)), None)
            if bad is not None:
                raise TypeError(f"{what} must hold Examples (core.data.batching.encode_pairs makes them from sentence "
                                f"pairs), got {type(bad).__name__} {str(bad)[:40]!r}")
        check_keep_best(config.keep_best, config.patience, eval_every=config.eval_every,
                        bleu_sentences=config.bleu_sentences, synthetic=task_of(bundle.info) is not None)
        if config.keep_best and not valid_pairs:
            raise ValueError(f"TrainConfig.keep_best {config.keep_best} needs validation pairs to score")
        self.bundle = bundle
        self.config = config
        # Which evaluation was the best (None without keep_best); stopped_early: its patience ran out.
        self.keeper = BestKeeper(config.keep_best, config.patience) if config.keep_best else None
        self.stopped_early = False
        self.device = resolve_device(config.device)
        self.amp_dtype = resolve_amp(config.amp, self.device)
        self.model = bundle.model.to(self.device)
        self.valid_pairs = valid_pairs or []
        self.valid = valid or []
        self.rank, self.world_size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        self.batcher = TokenBatcher(train, config.max_tokens, shuffle=True, seed=config.seed, bucket=config.bucket)
        # Bucketed batches have fixed shapes; the grid keeps them so (core/training/acceleration.py).
        self.objective: nn.Module = Objective(self.model, config.label_smoothing, grid=config.bucket > 0)
        # Under DDP, accumulation's micro-batches skip the gradient all-reduce but the last (no_sync); the
        # DDP wrapper is kept apart, since torch.compile's wrapper around it is no DDP module.
        self._ddp: nn.parallel.DistributedDataParallel | None = None
        if dist.is_initialized():  # torchrun's ranks (train_cli starts no group for a single process)
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.objective = self._ddp = nn.parallel.DistributedDataParallel(self.objective, device_ids=ids)
        if config.compile:
            self.objective = compile_objective(self.objective, cuda_graphs=config.cuda_graphs)
        # readback_every > 1: the figures stay on the device between read-backs (core/training/acceleration.py).
        self.window = FigureWindow(self.device) if config.readback_every > 1 else None
        self._measured: StepEvent | None = None  # the last read-back's event, whose figures later steps repeat
        self.optimizer = make_optimizer(self.model, config.weight_decay)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp_dtype == torch.float16)
        self.step_count = 0
        self.bad_steps = 0
        self.warm_from: int | None = None  # the step a warm start took the schedule up at (warm_start)
        self._batches: Iterator[Batch] | None = None
        self._lock = threading.Lock()  # held while weights change; snapshot() waits for it
        self._running = threading.Event()
        self._running.set()
        self.waiting = False  # paused and waiting between steps (the pause has taken effect)
        self._pausing = threading.Lock()  # pause/resume and the loop's look at them, one at a time
        self._stop = threading.Event()
        # True while step() runs: between its first batch and its update the run's state is half-way (the
        # batcher has moved on, the weights not yet), so a Ctrl-C waits for the step's end (train_cli).
        self.stepping = False
        self.last_event: StepEvent | None = None  # the latest step's, even before run() has handed it over

    # ----- control from other threads ----------------------------------------------
    def pause(self) -> None:
        with self._pausing:
            self._running.clear()

    def resume(self) -> None:
        with self._pausing:
            self.waiting = False  # now, not when the loop wakes: a pause right after must not read it
            self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self.resume()  # wake a paused loop so it can see the stop

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def snapshot(self) -> ModelBundle:
        """A copy of the current weights (between two steps, never half-updated), eval mode, CPU."""
        with self._lock:
            model = copy.deepcopy(self.model).to("cpu").eval()
            step = self.step_count
        return replace(self.bundle, model=model, info={**self.bundle.info, "step": step}, path=None)

    # ----- training ----------------------------------------------------------------
    def lr_at(self, step: int) -> float:
        c = self.config
        rate = learning_rate(step, schedule=c.schedule, d_model=self.model.config.d_model, warmup=c.warmup,
                             factor=c.lr_factor, peak_lr=c.peak_lr)
        if self.warm_from is not None:  # fresh moments: gathered at rate 0 first, then the rate ramped in
            rate *= min(1.0, max(0, step - self.warm_from - GATHER_STEPS) / REWARM_STEPS)
        return rate

    def warm_start(self, step: int) -> None:
        """Go on from weights whose trainer state is lost (a shipped or averaged checkpoint, another machine's run):
        the schedule taken up at their step, the batches of a later epoch, and Adam's moments new: gathered over
        GATHER_STEPS steps at rate 0, then the rate ramps up again over REWARM_STEPS steps. Not an exact resume:
        that needs the state (load_state_dict)."""
        self.step_count = self.warm_from = int(step)
        self.batcher.epoch = 1 + step // max(1, len(self.batcher))  # not the first epoch's order over again
        self.batcher.position = 0
        self._batches = None

    def _next_batches(self) -> list[Batch]:
        """The next `accum` batches of this rank: every rank reads the same stream and keeps
        every world_size-th batch, so shards differ and step counts stay in lock-step."""
        if self._batches is None:
            self._batches = self.batcher.batches_forever()
        out = []
        while len(out) < self.config.accum:
            for r in range(self.world_size):
                batch = next(self._batches)
                if r == self.rank:
                    out.append(batch)
        return out

    def _precision(self) -> contextlib.ExitStack:
        return precision(self.amp_dtype, self.device)

    def step(self) -> StepEvent:
        """One optimizer step over `accum` batches."""
        self.stepping = True
        try:
            return self._step()
        finally:
            self.stepping = False

    def _step(self) -> StepEvent:
        started = time.perf_counter()
        # Pinned host memory copies to the GPU without waiting for it (no host sync in the deferred path).
        batches = [b.to(self.device, non_blocking=self.window is not None) for b in self._next_batches()]
        n_tokens = sum(b.n_tgt_tokens for b in batches)
        total_tokens = self._total_tokens(n_tokens)
        self.model.train()
        # Loss, nll and correct tokens stay on the device until they are read back once, after the last
        # backward pass (on a GPU each .item() stalls the queue of kernels; fp16's loss scale and DDP's
        # all-reduces of token counts and of the finite flag still read one value each).
        sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        with self._lock:
            self.optimizer.zero_grad(set_to_none=True)
            for i, b in enumerate(batches):
                sync = i == len(batches) - 1 or self._ddp is None
                if self.config.cuda_graphs:  # each call replays the graphs anew (torch.compile's CUDA graphs)
                    torch.compiler.cudagraph_mark_step_begin()
                with (contextlib.nullcontext() if sync else self._ddp.no_sync()), self._precision():
                    loss, nll, hits = self.objective(b.src, b.tgt_in, b.tgt_out)
                # Divide by the tokens of the whole step (all ranks): DDP averages gradients over
                # ranks, so multiply back by world_size to get the per-token mean of the step.
                self.scaler.scale(loss * self.world_size / total_tokens).backward()
                sums += torch.stack([loss.detach().double(), nll.double(), hits.double()])
            self.step_count += 1
            lr = self.lr_at(self.step_count)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.scaler.unscale_(self.optimizer)
            grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(),
                                                 self.config.clip_norm if self.config.clip_norm > 0 else math.inf)
            padding = sum(b.padding_ratio for b in batches) / len(batches)
            if self.window is not None:
                return self._deferred_update(sums, grad_norm, n_tokens, padding, lr)
            loss_sum, nll_sum, correct, grad_norm = torch.cat([sums, grad_norm.double().view(1)]).tolist()
            # Every rank decides alike (DDP): a rank that gave up alone would leave the others waiting.
            loss_finite = self._all_reduce_sum(0.0 if math.isfinite(loss_sum) else 1.0) == 0
            finite = loss_finite and math.isfinite(grad_norm)
            scale = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
            if finite or self.scaler.is_enabled():
                self.scaler.step(self.optimizer)  # the fp16 scaler skips non-finite steps itself
                self.scaler.update()
        skipped = not finite
        # fp16: gradients that overflow at the loss scaler's scale are its everyday business (it skips the
        # update and halves the scale), not a sign of divergence, until the scale is below 1: then they
        # overflow unscaled.
        overflow = skipped and loss_finite and self.scaler.is_enabled() and scale >= MIN_LOSS_SCALE
        self._count_bad(skipped and not overflow, loss_sum)
        elapsed = time.perf_counter() - started
        denom = max(n_tokens, 1)
        return StepEvent(step=self.step_count, loss=loss_sum / denom,
                         perplexity=math.exp(min(nll_sum / denom, 50.0)), accuracy=correct / denom, lr=lr,
                         tokens_per_s=n_tokens * self.world_size / elapsed, grad_norm=grad_norm,
                         padding_ratio=padding, skipped=skipped, tokens=n_tokens)

    def _deferred_update(self, sums: torch.Tensor, grad_norm: torch.Tensor, n_tokens: int, padding: float,
                         lr: float) -> StepEvent:
        """The update, skipped on the device when the loss or gradients are not finite, and the step's figures
        added to the window; read back every readback_every steps and before an evaluation or the last step.
        Under DDP the gradients are all-reduced, so every rank's gradient norm, and decision, is the same."""
        scale = self.scaler._get_scale_async() if self.scaler.is_enabled() else None
        skip = self.window.add(sums, grad_norm, n_tokens, padding, scale)
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)  # fused Adam: the scaler's found_inf skips it on the device too
            self.scaler.update()
        else:
            step_unless(self.optimizer, skip)
        every, step = self.config.eval_every, self.step_count
        if step % self.config.readback_every and step < self.config.max_steps and not (every and step % every == 0):
            last = self._measured
            figures = {k: getattr(last, k) if last else math.nan
                       for k in ("loss", "perplexity", "accuracy", "tokens_per_s", "grad_norm", "padding_ratio")}
            return StepEvent(step=step, lr=lr, measured=False, tokens=n_tokens, **figures)
        f = self.window.read(self.world_size)
        self.bad_steps = f.bad_run
        if f.bad:
            warnings.warn(f"steps {step - f.steps + 1}-{step}: {f.bad} with a non-finite loss or gradients; their "
                          f"updates were skipped", stacklevel=2)
        if f.bad_run >= self.config.max_bad_steps:
            raise TrainingStopped(f"training stopped: the loss or gradients were NaN/inf {f.bad_run} steps in a row "
                                  f"(by step {step}); try a lower learning rate, a longer warm-up or gradient clipping")
        self._measured = StepEvent(step=step, loss=f.loss, perplexity=math.exp(min(f.nll, 50.0)), accuracy=f.accuracy,
                                   lr=lr, tokens_per_s=f.tokens_per_s, grad_norm=f.grad_norm,
                                   padding_ratio=f.padding_ratio, skipped=f.skipped > 0)
        return replace(self._measured, tokens=n_tokens)

    def _total_tokens(self, n_tokens: int) -> float | torch.Tensor:
        """The target tokens of the whole step, all ranks; in the deferred path a device tensor, summed over
        ranks without a host sync."""
        if self.window is None or self.world_size == 1:
            return self._all_reduce_sum(float(n_tokens))
        pinned = self.device.type == "cuda"  # a blocking copy to the GPU would wait for it
        total = torch.tensor(float(n_tokens), pin_memory=pinned).to(self.device, non_blocking=pinned)
        dist.all_reduce(total)
        return total

    def _count_bad(self, skipped: bool, loss: float) -> None:
        if not skipped:
            self.bad_steps = 0
            return
        self.bad_steps += 1
        warnings.warn(f"step {self.step_count}: non-finite loss or gradients (loss {loss}); update skipped "
                      f"({self.bad_steps} in a row)", stacklevel=2)
        if self.bad_steps >= self.config.max_bad_steps:
            raise TrainingStopped(f"training stopped: the loss or gradients were NaN/inf {self.bad_steps} steps in "
                                  f"a row (last at step {self.step_count}); try a lower learning rate, a longer "
                                  f"warm-up or gradient clipping")

    def _all_reduce_sum(self, value: float) -> float:
        if self.world_size == 1:
            return value
        t = torch.tensor([value], device=self.device, dtype=torch.float64)
        dist.all_reduce(t)
        return float(t.item())

    def _wait_while_paused(self) -> None:
        """Block while paused, with `waiting` true exactly then (what the studio reports as paused)."""
        while True:
            with self._pausing:
                self.waiting = not self._running.is_set()
                if not self.waiting:
                    return
            self._running.wait()

    def run(self, callback: Callable[[StepEvent], None] | None = None) -> None:
        """Train until max_steps, stop() or (with a patience) an evaluation that ends it; waits while paused.
        Evaluates every eval_every steps; with keep_best, each evaluation's validation["best"] says whether
        it is the best so far (the moment to save or snapshot the model)."""
        while self.step_count < self.config.max_steps and not self.stopped and not self.stopped_early:
            self._wait_while_paused()
            if self.stopped:
                break
            event = self.last_event = self.step()  # a caller interrupted in the evaluation below still has it
            every = self.config.eval_every
            due = every and (self.step_count % every == 0 or self.step_count == self.config.max_steps)
            if due and not self.stopped:  # a stop asked during the step is not kept waiting by a validation
                event.validation = self.evaluate()
                if self.keeper:
                    self._keep_best(event.validation)
            if callback is not None:
                callback(event)

    def _keep_best(self, validation: dict[str, Any]) -> None:
        """Rank 0 scores BLEU (evaluate), so it judges; every rank learns whether training stops."""
        best = self.rank == 0 and self.keeper.observe(self.step_count, validation)
        validation["best"] = best
        if best:
            self.bundle.info["best"] = self.keeper.record()
        self.stopped_early = self._all_reduce_sum(float(self.rank == 0 and self.keeper.exhausted)) > 0

    # ----- evaluation -------------------------------------------------------------
    @torch.no_grad()
    def validation_loss(self) -> dict[str, float]:
        if not self.valid:
            return {}
        self.model.eval()
        loss_sum = nll_sum = correct = tokens = 0.0
        objective = Objective(self.model, self.config.label_smoothing)
        for b in TokenBatcher(self.valid, self.config.max_tokens, shuffle=False):
            b = b.to(self.device)
            with self._precision():
                loss, nll, hits = objective(b.src, b.tgt_in, b.tgt_out)
            loss_sum, nll_sum, correct = loss_sum + loss.item(), nll_sum + nll.item(), correct + hits.item()
            tokens += b.n_tgt_tokens
        return {"val_loss": loss_sum / tokens, "val_perplexity": math.exp(min(nll_sum / tokens, 50.0)),
                "val_accuracy": correct / tokens}

    def evaluate(self) -> dict[str, Any]:
        """Validation loss, BLEU of greedy output on a validation sample, a few sample translations."""
        result: dict[str, Any] = dict(self.validation_loss())
        pairs = self.valid_pairs[: self.config.bleu_sentences]
        if pairs and self.rank == 0:
            bundle = replace(self.bundle, model=self.model, path=None)
            # translate_detailed, not translate: a young model's outputs running to the length limit
            # are expected here, not something to warn about.
            hypotheses = [r.text for r in translate_detailed(bundle, [s for s, _ in pairs], method="greedy")]
            scores = evaluate_bleu(hypotheses, [t for _, t in pairs])
            result["bleu"] = scores.bleu
            result["exact_match"] = sum(h == t for h, (_, t) in zip(hypotheses, pairs)) / len(pairs)
            shown = list(zip(pairs, hypotheses))[: self.config.sample_translations]
            forced = teacher_forced_argmax(bundle, [s for (s, _), _ in shown], [t for (_, t), _ in shown])
            result["samples"] = [{"source": s, "reference": t, "output": h, "teacher_forced": f}
                                 for ((s, t), h), f in zip(shown, forced)]
        return result

    # ----- persistence -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything besides the weights that an exact resume needs. On a GPU, dropout draws
        from that device's generator, so its state is kept too (under DDP, rank 0's states are
        saved and every rank resumes from them)."""
        state = {"step": self.step_count, "optimizer": self.optimizer.state_dict(),
                 "scaler": self.scaler.state_dict(), "batcher": self.batcher.state_dict(),
                 "train_config": asdict(self.config), "torch_rng": torch.get_rng_state(),
                 "python_rng": random.getstate(), "bad_steps": self.bad_steps, "warm_from": self.warm_from}
        if self.keeper:
            state["keep_best"] = self.keeper.state_dict()
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = int(state["step"])
        self.warm_from = state.get("warm_from")  # a warm-started run resumed mid-ramp goes on ramping
        self.bad_steps = int(state.get("bad_steps", 0))  # a run saved in a row of NaN steps goes on counting it
        if self.window is not None:
            self.window.resume_run(self.bad_steps)
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # this run's setting (a resume may change it), not the saved one
            group["weight_decay"] = self.config.weight_decay
            group["decoupled_weight_decay"] = True  # a run saved before weight decay was decoupled too
        if state["scaler"]:  # empty when saved without fp16: a resume under fp16 starts at the scaler's first scale
            self.scaler.load_state_dict(state["scaler"])
        self.batcher.load_state_dict(state["batcher"])
        self._batches = None
        if self.keeper and "keep_best" in state:
            self.keeper.load_state_dict(state["keep_best"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        if self.device.type == "cuda" and "cuda_rng" in state:  # a state saved on the CPU has none
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)

    def save(self, path: str | Path, with_state: bool = True) -> Path:
        """Atomic checkpoint of the weights, tokenizer, config and (with_state) this trainer's state, which
        a resume needs and a kept best model does not."""
        with self._lock:
            self.bundle.info["train"] = asdict(self.config)
            self.bundle.info["step"] = self.step_count
            return save_checkpoint(path, self.bundle, self.state_dict() if with_state else None)
