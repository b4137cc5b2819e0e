"""Training in a notebook, and watching it: the Train tab's run (studio/train/job.py: the same settings, trainer,
snapshots and figures) started from a cell, which redraws its curves, the latest samples and the cross-attention
of a fixed example as the model learns. The kernel's stop button (KeyboardInterrupt) stops it after the step
under way, never inside one; ``Run.save`` writes a checkpoint whole or not at all (core's save is atomic).

``curves`` draws any run's training curves: one trained here, or a run folder of ``train_cli.py train --out``
(its metrics.jsonl).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..server.registry import CHECKPOINTS, ModelRegistry
from ..text import md
from ..train import plots as train_plots
from ..train.job import ACTIVE, Evaluation, JobView, TrainingJob
from ..train.setup import Settings
from .view import View


def metrics_view(folder: str | Path) -> JobView:
    """A run folder's metrics.jsonl (a line per step, an evaluation's figures under "validation") as the Train
    tab's figures read a run."""
    path = Path(folder).expanduser() / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent}: no metrics.jsonl (a run folder of train_cli.py train --out has one)")
    history, evaluations = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else None
        if not record:
            continue
        validation = record.pop("validation", None) or {}
        history.append(record)
        if validation:
            metrics = {k: v for k, v in validation.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            evaluations.append(Evaluation(record["step"], 0.0, metrics, list(validation.get("samples", []))))
    step = history[-1]["step"] if history else 0
    return JobView(version=0, state="finished", message=str(path.parent), settings=None, facts={}, step=step,
                   max_steps=_max_steps(path.parent, step), elapsed=0.0, eta=None, history=history,
                   evaluations=evaluations, frames=[], example=None, last_good_step=None)


def _max_steps(folder: Path, step: int) -> int:
    try:
        return int(json.loads((folder / "run.json").read_text(encoding="utf-8"))["max_steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return step


def _samples(view: JobView) -> str:
    """The latest evaluation's figures and samples, as the Train tab lists them."""
    if not view.evaluations:
        return ""
    last = view.evaluations[-1]
    figures = ", ".join(f"{k} {v:.3g}" for k, v in last.metrics.items())
    lines = [f"- {md(s.get('source', ''))} → **{md(s.get('output', ''))}** (reference: {md(s.get('reference', ''))})"
             for s in last.samples]
    return f"Step {last.step}: {figures}\n\n" + "\n".join(lines)


def _status(view: JobView) -> str:
    return f"**{view.state}**: step {view.step:,} of {view.max_steps:,}, {view.elapsed:.0f} s. {md(view.message)}"


@dataclass
class Run:
    """A training run started in this notebook: its view (JobView), its newest weights (``bundle``, for any
    other view), its figures, and saving."""

    job: TrainingJob
    name: str
    registry: ModelRegistry

    @property
    def view(self) -> JobView:
        return self.job.view()

    @property
    def bundle(self):
        """The newest weights (a CPU snapshot, eval mode), for translation(run, ...), attention(run, ...), ..."""
        return self.job.refresh() or self.registry.get(self.name)

    def curves(self) -> View:
        return curves(self)

    def attention(self, step: int | None = None, layer: int = 1, head: int = 0) -> View:
        """The fixed example's cross-attention at a step (None: the latest snapshot), layer from 1, head from 1
        (0: the mean of the heads), as the Train tab's timeline draws it."""
        view = self.view
        return View(train_plots.training_attention(view, step, layer, head), {}, "", "training attention")

    def save(self, name: str = "") -> Path:
        """The newest weights as a checkpoint in the run's folder (train's `out`), NAME-stepN; never replaces one."""
        return self.job.save(name)

    @property
    def training(self) -> bool:
        return self.view.state in ACTIVE

    def watch(self, every_s: float = 1.0) -> None:
        """Redraw the run until it ends; the kernel's stop button stops it after the step under way. It waits
        by sleeping, which an interrupt may cut anywhere (a thread's join, cut, could end its wait too soon)."""
        live = None
        try:  # the live output made inside too: its first imports take a moment, and the button may come then
            live = _Live()
            while self.training:
                live.show(self.view)
                time.sleep(every_s)
        except KeyboardInterrupt:
            self.stop()
        (live or _Live()).show(self.view)

    def stop(self) -> None:
        """Stop after the step under way, and wait for it (a second interrupt meanwhile is ignored)."""
        try:
            self.job.stop()
        except ValueError:  # it had ended already
            pass
        while self.training:
            try:
                time.sleep(0.05)
            except KeyboardInterrupt:
                continue


class _Live:
    """The cell's live output: the status line, the curves, the samples and the attention, drawn again whenever the
    run has moved on; outside a kernel, a status line printed per update. Drawn again, not updated through display
    handles: JupyterLab's plotly renderer draws a figure once and ignores updates to it (jupyterlab-plotly's
    renderModel returns once a graph exists), so the curves stood still there. clear_output(wait=True) clears the
    cell only as the new outputs arrive: no flicker, in JupyterLab, Notebook and Colab alike."""

    def __init__(self) -> None:
        self.drawn: tuple[str, int, int] | None = None
        try:
            from IPython import get_ipython
            self.kernel = getattr(get_ipython(), "kernel", None) is not None
        except ImportError:
            self.kernel = False

    def show(self, view: JobView) -> None:
        moved = (view.state, view.step, view.version)
        if moved == self.drawn:
            return
        self.drawn = moved
        if not self.kernel:
            print(f"{view.state}: step {view.step}/{view.max_steps}, {view.elapsed:.0f} s", flush=True)
            return
        from IPython.display import Markdown, clear_output, display

        clear_output(wait=True)
        display(Markdown(_status(view)), train_plots.training_curves(view),
                Markdown(_samples(view) or "*No evaluation yet.*"), train_plots.training_attention(view, None, 1, 0))


SETTINGS = [f.name for f in fields(Settings)]


def train(*, out: str | Path = CHECKPOINTS, every_s: float = 1.0, watch: bool = True, **settings: Any) -> Run:
    """Train a model as the Train tab does (settings: its Settings' fields; by default the lecture run, the tiny
    preset on the numbers task, 600 steps) and watch it here. out: where Run.save writes (default: the studio's
    checkpoints/, whose models the studio offers). watch=False returns at once, the run training on."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"unknown training settings {', '.join(unknown)}; allowed: {', '.join(SETTINGS)}")
    chosen = Settings(**{"name": "notebook-run", **settings})
    registry = ModelRegistry(None)
    job = TrainingJob(registry, Path(out))
    run = Run(job, job.start(chosen), registry)
    if watch:
        run.watch(every_s)
    return run


def curves(run: Run | str | Path) -> View:
    """A run's training and validation curves (loss, perplexity, accuracy, learning rate, speed, BLEU): a run
    trained here, or a run folder of train_cli.py."""
    view = run.view if isinstance(run, Run) else metrics_view(run)
    numbers = {"history": view.history, "evaluations": [
        {"step": e.step, **e.metrics, "samples": e.samples} for e in view.evaluations]}
    return View(train_plots.training_curves(view), numbers, _samples(view), "training curves")
