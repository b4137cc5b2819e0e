"""The training loop of `train`: a progress bar (or a line every LOG_EVERY steps or LOG_SECONDS in a log),
metrics.jsonl, periodic checkpoints keeping the last few (and with --keep-best, the best in best/), and Ctrl-C or
SIGTERM saving the run before it exits."""
from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from core.checkpoint import copy_checkpoint

from .common import CHECKPOINT_PREFIX, run_checkpoints

LOG_EVERY = 100  # steps between the lines of a training log without a progress bar, at most...
LOG_SECONDS = 60  # ...and seconds: a run of slow steps shows its pace within a minute, not after 100 steps
# What stops a run, saving it first: Ctrl-C, and what `timeout`, a Space's restart or a cluster's preemption send.
STOP_SIGNALS = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "terminated (SIGTERM)"}
# train_cli.py as a program sets this: after a stop's save the process ends, and further presses stay ignored to the
# end (one would print a traceback from the interpreter's shutdown). Called in-process (a notebook, a test), the
# handlers come back as they were, or the kernel's stop button would be ignored from then on.
IGNORE_STOPS_TO_EXIT = False
BEST = "best"  # the folder of a run's best checkpoint (--keep-best)


@dataclass(frozen=True)
class Saving:
    """Where and how often a run is saved: train's --out, --save-every, --keep-last and --tensorboard."""
    out: Path
    every: int
    keep_last: int
    tensorboard: bool = False


class MetricsLog:
    """A run's metrics.jsonl (and TensorBoard): a line per measured step, and the last step written."""

    def __init__(self, out: Path, tensorboard: bool, step: int):
        self.file = open(out / "metrics.jsonl", "a")
        self.board = open_tensorboard(out) if tensorboard else None
        self.logged = step

    def write(self, event) -> None:
        record = {k: v for k, v in event.to_dict().items() if v is not None}
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        self.logged = event.step
        if self.board:
            for key in ("loss", "perplexity", "accuracy", "lr", "tokens_per_s", "grad_norm"):
                self.board.add_scalar(f"train/{key}", record[key], event.step)
            for key, value in (event.validation or {}).items():
                if isinstance(value, (int, float)):
                    self.board.add_scalar(f"valid/{key}", value, event.step)

    def close(self) -> None:
        self.file.close()
        if self.board:
            self.board.close()  # flushes the last events to disk


def train_loop(trainer, saving: Saving, rank: int) -> None:
    """Steps with a progress bar; metrics.jsonl, periodic checkpoints, Ctrl-C or SIGTERM saves first."""
    # disable=None: a bar on a terminal; a redirected log gets a plain line every LOG_EVERY steps instead
    bar = tqdm(total=trainer.config.max_steps, initial=trainer.step_count, disable=None if rank == 0 else True,
               unit="step", dynamic_ncols=True)
    metrics = MetricsLog(saving.out, saving.tensorboard, trainer.step_count) if rank == 0 else None
    plain = PlainLog(trainer.config.max_steps)

    def on_step(event) -> None:
        if rank != 0:
            return
        bar.update(1)
        status = dict(loss=f"{event.loss:.3f}", ppl=f"{event.perplexity:.1f}", lr=f"{event.lr:.2e}",
                      tok_s=f"{event.tokens_per_s:.0f}")
        bar.set_postfix(status)
        if bar.disable and plain.due(event.step):
            print(f"step {event.step}/{trainer.config.max_steps}: "
                  + " ".join(f"{k} {v}" for k, v in status.items()), flush=True)
        if event.measured:  # --readback-every N: the N-th step's line holds the means of the N steps
            metrics.write(event)
        if event.validation:
            shown = " ".join(f"{k} {v:.3f}" for k, v in event.validation.items() if isinstance(v, float))
            bar.write(f"step {event.step}: {shown}" + (f" (best: saved in {BEST}/)" if event.validation.get("best")
                                                       else ""))
            for sample in event.validation.get("samples", [])[:1]:  # seed 004's preview beside the reference
                bar.write(sample_lines(sample))
            if event.validation.get("best"):
                trainer.save(saving.out / BEST, with_state=False)  # the weights alone: resuming starts from a step-N
        if event.step % saving.every == 0 or event.step == trainer.config.max_steps:
            save(trainer, saving)

    received = []

    def on_stop_signal(signum, frame) -> None:
        # Ignored while the run saves (a second Ctrl-C would lose its work), and as a program to its exit.
        for stop in STOP_SIGNALS:
            signal.signal(stop, signal.SIG_IGN)
        received.append(signum)
        trainer.stop()
        if not trainer.stepping:  # between steps the run's state is whole: saved at once
            raise KeyboardInterrupt
        # Inside a step the batcher has moved on and the weights not yet: the step ends first, then
        # run() returns and the run is saved as it stands, so that a resume takes it up exactly.

    previous = {stop: signal.signal(stop, on_stop_signal) for stop in STOP_SIGNALS}
    try:
        trainer.run(on_step)
        if trainer.stopped:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        bar.close()
        if rank == 0:
            last = trainer.last_event
            if last is not None and last.step > metrics.logged and last.measured:  # stopped in its evaluation
                metrics.write(last)  # the step is kept, logged without the evaluation
            stop = received[0] if received else signal.SIGINT
            print(f"\n{STOP_SIGNALS[stop]}: saving a checkpoint first (further Ctrl-C presses and signals are "
                  f"ignored)", file=sys.stderr)
            path = save(trainer, saving)
            # final/ too: one left from an earlier end of this run would otherwise be evaluated as its latest
            final = copy_checkpoint(path, saving.out / "final")
            print(f"saved {path} (and {final.name}/); continue with: python {sys.argv[0]} train --out "
                  f"{saving.out.resolve()} --resume", file=sys.stderr)
        raise SystemExit(128 + (received[0] if received else signal.SIGINT)) from None  # the shell's way
    finally:
        if not (trainer.stopped and IGNORE_STOPS_TO_EXIT):
            for stop, handler in previous.items():
                signal.signal(stop, handler)
        bar.close()
        if metrics:
            metrics.close()
    if rank == 0:
        if trainer.stopped_early:
            print(f"stopped early at step {trainer.step_count}: no better {trainer.keeper.metric} in "
                  f"{trainer.keeper.patience} evaluation{'s' * (trainer.keeper.patience != 1)}")
            saved = run_checkpoints(saving.out)
            if not saved or saved[-1].name != checkpoint_name(trainer.step_count):
                save(trainer, saving)  # the step it stopped at, for final/ and a resume
        final = copy_checkpoint(run_checkpoints(saving.out)[-1], saving.out / "final")  # never half of one
        if trainer.keeper:
            print(f"done: {trainer.step_count} steps; final checkpoint {final} (the last step's); best checkpoint "
                  f"{saving.out / BEST} ({trainer.keeper.describe()})")
        else:
            print(f"done: {trainer.step_count} steps; final checkpoint {final} (the last step's: `average` the last "
                  f"few, or evaluate a step-N folder, where a validation score was higher earlier)")


class PlainLog:
    """When a training log without a progress bar gets a step's line: this session's first step, then every
    LOG_EVERY steps or LOG_SECONDS, whichever comes first, and the last step."""

    def __init__(self, max_steps: int):
        self.max_steps = max_steps
        self.printed_at: float | None = None

    def due(self, step: int) -> bool:
        now = time.monotonic()
        if (self.printed_at is None or step % LOG_EVERY == 0 or step == self.max_steps
                or now - self.printed_at >= LOG_SECONDS):
            self.printed_at = now
            return True
        return False


def sample_lines(sample: dict[str, str]) -> str:
    """A validation sample as the log shows it: the reference, the model's likeliest token at each of its places
    (teacher forcing) and its greedy translation."""
    return "\n".join(f"  {label:<22} {sample.get(key, '')}" for label, key in (
        ("source", "source"), ("reference", "reference"), ("teacher-forced argmax", "teacher_forced"),
        ("greedy", "output")))


def checkpoint_name(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}{step:07d}"


def save(trainer, saving: Saving) -> Path:
    path = trainer.save(saving.out / checkpoint_name(trainer.step_count))
    # Renamed out of the way first (one atomic step), then deleted: a Ctrl-C inside the deletion leaves
    # a hidden folder that the next save sweeps away, never a half-deleted step folder.
    for old in run_checkpoints(saving.out)[: -saving.keep_last]:
        trash = old.with_name(f".{old.name}.pruning")
        if trash.exists():  # an interrupted pruning of this step's checkpoint before a resume trained it again
            shutil.rmtree(trash)
        old.rename(trash)
    for trash in saving.out.glob(f".{CHECKPOINT_PREFIX}*.pruning"):
        shutil.rmtree(trash)
    return path


def open_tensorboard(out: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("note: TensorBoard is not installed (pip install tensorboard); logging to metrics.jsonl only",
              file=sys.stderr)
        return None
    return SummaryWriter(str(out / "tensorboard"))
