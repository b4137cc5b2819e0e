"""The Train tab's training job: one per app process, shared by every browser session.

``TrainingJob.start(settings)`` reads the corpus, builds a fresh model and runs core's Trainer in a thread of its
own, the preparation too (at the training's low priority, inside a public run's time limit, stopped by Stop between
its stages; Stop also ends an evaluation under way); the UI only reads ``view()`` (a copy of the job's state, taken
under a lock) on a timer, so closing the browser tab changes nothing and a reconnecting session sees the run as it
is. The model being trained is offered in the model picker as a consistent CPU snapshot, refreshed at each
evaluation, at the end and on ``refresh()``. No Gradio here: the tests drive this module directly.
"""
from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from core.bundle import ModelBundle
from core.training.trainer import StepEvent, Trainer, TrainingStopped

from ..server import limits, priority
from ..server.registry import CHECKPOINTS, ModelRegistry
from .downloads import Downloads
from .saving import folder_bytes, make_room, safe_name, write_checkpoint
from .setup import PreparationStopped, Settings, check_size, cross_attention, prepare

TRAINING = ("running", "paused", "stopping")  # a run with a trainer (preparing: not yet)
ACTIVE = ("preparing", *TRAINING)
PAUSING = "The step under way ends first; press Resume to go on."  # until the trainer waits
ETA_WINDOW_S = 120  # the training time whose pace estimates the time left
TRAIN_NICE = 10  # the training thread's CPU priority (Linux nice): visitors' requests come first
MAX_FRAMES = 200  # attention snapshots kept; beyond, every other one is dropped
MAX_POINTS = 4000  # per-step records kept; beyond, every other one is dropped
log = logging.getLogger("studio")


class JobBusy(RuntimeError):
    """Start was pressed while a run is going."""


@dataclass
class Frame:
    """The fixed example's cross-attention at one step: (layers, heads, target, source)."""

    step: int
    cross: np.ndarray


@dataclass
class Evaluation:
    step: int
    seconds: float
    metrics: dict[str, float]  # val_loss, val_perplexity, val_accuracy, bleu, exact_match
    samples: list[dict[str, str]]  # source, reference, output


@dataclass
class JobView:
    """A consistent copy of the job's state for rendering."""

    version: int
    state: str  # idle, preparing, running, paused, stopping, stopped, finished, failed
    message: str
    settings: Settings | None
    facts: dict[str, str]
    step: int
    max_steps: int
    elapsed: float  # seconds of training, pauses excluded
    eta: float | None
    history: list[dict[str, float]]
    evaluations: list[Evaluation]
    frames: list[Frame]
    example: tuple[list[str], list[str]] | None  # the frames' (target rows, source columns) tokens
    last_good_step: int | None
    owner: str | None = None  # on a public studio, the page (session) that controls the run; None: anyone
    run: int = 0  # which of the job's runs this is (1, 2, …; 0 before the first)


# ----- small helpers ---------------------------------------------------------------------
def weights_finite(bundle: ModelBundle) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in bundle.model.parameters())


def _lower_priority() -> None:
    """Lower this thread's CPU priority (Linux schedules threads one by one), so that translations
    and page updates are served first and training takes the time left over."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), TRAIN_NICE))
    except (AttributeError, OSError):  # not Linux, or not permitted: train at normal priority
        pass


def _thin(items: list, limit: int) -> list:
    """Every other item (always keeping the last) once there are more than limit."""
    return items if len(items) <= limit else items[::2] + ([items[-1]] if len(items) % 2 == 0 else [])


# ----- the job --------------------------------------------------------------------------------
@dataclass
class _Run:
    """What one started run owns."""

    settings: Settings
    trainer: Trainer
    example: tuple[list[int], list[int]]  # (source ids, decoder input ids) of the attention example
    facts: dict[str, str]
    history: list[dict[str, float]] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    frame_every: int = 10
    last_good: ModelBundle | None = None
    last_good_step: int | None = None
    best: ModelBundle | None = None  # with keep_best: the weights of the best evaluation so far
    saved: tuple[int, str] | None = None  # (step, checkpoint name) of the run's last save
    saves: int = 0  # checkpoints this run wrote (a public studio's are limited: limits.PUBLIC_SAVES_PER_RUN)
    started: float = field(default_factory=time.monotonic)
    owner: str | None = None  # the session that started it (public studio)
    time_up: bool = False  # stopped by limits.PUBLIC_MAX_MINUTES
    # Set by Stop and the time limit: an evaluation under way ends at once (_interruptible).
    interrupt: threading.Event = field(default_factory=threading.Event)
    preparation: "_Preparing | None" = None  # how it began
    paused_total: float = 0.0
    paused_since: float | None = None
    ended: float | None = None

    def elapsed(self) -> float:
        now = self.paused_since or self.ended or time.monotonic()
        return now - self.started - self.paused_total


@dataclass
class _Preparing:
    """A run being prepared in the training thread (its corpus read, its vocabulary learnt, its model built): inside
    its time limit, which starts at Start, and stopped by Stop between the stages and while the vocabulary is learnt
    (issue 67: a 100 MB line kept BPE on both cores for 10 minutes, at normal priority, and Stop answered "Nothing is
    training")."""

    settings: Settings
    owner: str | None
    started: float = field(default_factory=time.monotonic)
    stop: threading.Event = field(default_factory=threading.Event)
    time_up: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None  # why it did not become a run

    def check(self) -> None:
        """PreparationStopped once Stop was pressed or the time is up."""
        if self.stop.is_set():
            raise PreparationStopped(f"{self.settings.name} was stopped while it was being prepared"
                                     + (f" (this public studio's {limits.PUBLIC_MAX_MINUTES:.0f}-minute limit)"
                                        if self.time_up else "") + "; nothing was trained.")


class _Interrupted(Exception):
    """An evaluation stopped half-way: the run was stopped meanwhile."""


def _interruptible(run: _Run) -> None:
    """Stop ends an evaluation under way (issue 67: Stop waited 39 s for one that nothing would look at): every layer
    of the run's model raises _Interrupted once run.interrupt is set, in eval mode only (evaluations and attention
    frames; a training step, in train mode, ends whole). Trainer.snapshot's deep copies carry the hook, which leaves
    them alone: it acts on these layers only, and holds the event, not the run."""
    model, interrupt = run.trainer.model, run.interrupt
    layers = frozenset(id(layer) for layer in (*model.encoder_layers, *model.decoder_layers))

    def hook(module: torch.nn.Module, _inputs: object) -> None:
        if interrupt.is_set() and not module.training and id(module) in layers:
            raise _Interrupted()
    for layer in (*model.encoder_layers, *model.decoder_layers):
        layer.register_forward_pre_hook(hook)


class TrainingJob:
    def __init__(self, registry: ModelRegistry, checkpoints_dir: Path = CHECKPOINTS, public: bool = False):
        """public: bound every run and let only its starter's session control it (PUBLIC_MAX_*)."""
        self.registry = registry
        self.checkpoints_dir = Path(checkpoints_dir)
        self.public = public
        self._lock = threading.Lock()
        # Saves one at a time: two under one name at once took the same folder, and one answered FileNotFoundError.
        self._saving = threading.Lock()
        self._run: _Run | None = None
        self._preparing: _Preparing | None = None  # the run being prepared, while one is
        self._state = "idle"
        self._message = ""
        self._version = 0
        self._runs = 0  # runs started so far: names the run a view shows
        self._thread: threading.Thread | None = None
        self._names: set[str] = set()  # picker entries this job made (a new run may replace them)
        self._downloads = Downloads()
        if public:  # BPE's own worker threads (Rust's) would learn at normal priority, on every core: it learns in
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the training thread alone, at its priority

    # ----- control ------------------------------------------------------------------------
    def start(self, settings: Settings, session: str | None = None) -> str:
        """Prepare the run (corpus, model, trainer) and train it in a thread of its own, at low priority; returns the
        model's name in the picker once it trains. JobBusy while a run is going; ValueError for bad settings, or a
        run stopped while it was prepared. session: the browser session starting it (the only one that controls it
        on a public studio). A public run's time limit counts from here, its preparation included."""
        check_size(settings, self.public)
        with self._lock:
            if self._state in ACTIVE:
                current = self._preparing or self._run
                ending = f" {_ends_by_itself(current)}" if self.public and current else ""
                raise JobBusy(f"A training run is {self._state} (one at a time): stop it before starting another."
                              + ending)
            if settings.name in self.registry.names() and settings.name not in self._names:
                raise ValueError(f"Cannot start: a model called {settings.name!r} is already in the picker; "
                                 f"choose another name.")
            before = (self._state, self._message)
            preparing = self._preparing = _Preparing(settings, session)
            self._set("preparing", f"Reading the data and building {settings.name}…")
        self._thread = threading.Thread(target=self._prepare_and_train, args=(preparing, before),
                                        name="studio-training", daemon=True)
        self._thread.start()
        if self.public:
            timer = threading.Timer(limits.PUBLIC_MAX_MINUTES * 60, self._time_up, args=(preparing,))
            timer.daemon = True
            timer.start()
        preparing.done.wait()
        exc = preparing.failure
        if isinstance(exc, (ValueError, FileNotFoundError, MemoryError, RuntimeError, PreparationStopped)):
            raise ValueError(f"Cannot start: {exc}") from None
        if exc is not None:
            raise exc
        return settings.name

    def _prepare_and_train(self, preparing: _Preparing, before: tuple[str, str]) -> None:
        """The training thread: at low priority, prepare the run, then train it."""
        _lower_priority()
        try:
            run = self._prepared(preparing)
        except BaseException as exc:  # handed to start(), which says it
            preparing.failure = exc
            with self._lock:
                self._preparing = None
                self._set(*before) if not isinstance(exc, PreparationStopped) else self._set(before[0], str(exc))
            preparing.done.set()
            return
        preparing.done.set()
        self._train(run)

    def _prepared(self, preparing: _Preparing) -> _Run:
        """The run, prepared and in the picker, running."""
        settings = preparing.settings
        prepared = prepare(settings, self.public, preparing.check)
        run = _Run(settings, prepared.trainer, prepared.example, prepared.facts,
                   frame_every=max(1, settings.attention_every), started=preparing.started, preparation=preparing)
        run.frames.append(Frame(0, cross_attention(run.trainer.model, *run.example)))
        first = run.trainer.snapshot()
        _interruptible(run)
        preparing.check()
        if self.public:  # one visitor's runs do not pile up in everyone's picker (saved ones stay)
            for name in self._names - {settings.name}:
                self.registry.remove(name)
            self._names &= {settings.name}
        self._publish(run, first, new_model=True)
        with self._lock:
            run.owner = preparing.owner
            self._run, self._runs, self._preparing = run, self._runs + 1, None
            ending = f" {_ends_by_itself(run)}" if self.public else ""
            self._set("running", f"Training {settings.name} on {run.facts['device']}.{ending}")
        return run

    def _check_owner(self, session: str | None, action: str) -> None:
        """On a public studio, only the page (Gradio session) that started the run may `action` it,
        while it is open: once it closes or reloads (release()), any visitor may."""
        run = self._preparing or self._run
        if self.public and run is not None and run.owner is not None and session != run.owner:
            ending = f" {_ends_by_itself(run)}" if self._state in ACTIVE else ""
            raise ValueError(f"This run was started on another page; only that page can {action} it while it is "
                             f"open.{ending}")

    def release(self, session: str | None) -> None:
        """The page that started the run has closed or reloaded: nobody owns the run now, so any
        visitor may pause, stop or save it (before, it went on unsaved and unstoppable to its end)."""
        with self._lock:
            for run in (self._preparing, self._run):
                if run is not None and session is not None and run.owner == session:
                    run.owner = None
                    self._version += 1  # every page's buttons come alive

    def _time_up(self, preparing: _Preparing) -> None:
        """The time limit of the run that began as preparing: it stops, whether it trains or is still prepared."""
        with self._lock:
            run = self._run if self._run is not None and self._run.preparation is preparing else None
            if self._preparing is preparing:
                preparing.time_up = True
                preparing.stop.set()
            elif run is not None and self._state in ("running", "paused"):
                run.time_up = True
                run.trainer.stop()  # wakes a paused run too
                run.interrupt.set()
            else:
                return
            self._set("stopping", f"Stopping: runs on this public studio end {limits.PUBLIC_MAX_MINUTES:.0f} minutes "
                                  f"after they start.")

    def pause(self, session: str | None = None) -> None:
        with self._lock:
            self._check_owner(session, "pause")
            run = self._need("running", "The run is already paused; press Resume to go on." if self._state == "paused"
                             else "Nothing is training, so nothing to pause.")
            run.trainer.pause()
            run.paused_since = time.monotonic()
            # The trainer finishes the step it is in first (seconds, for a large model on a CPU);
            # view() names the step it stopped after once it waits.
            self._set("paused", PAUSING)

    def resume(self, session: str | None = None) -> None:
        with self._lock:
            self._check_owner(session, "resume")
            run = self._need("paused", "The run is already going; nothing to resume." if self._state == "running"
                             else "Nothing is paused, so nothing to resume.")
            run.paused_total += time.monotonic() - run.paused_since
            run.paused_since = None
            run.trainer.resume()
            self._set("running", f"Training {run.settings.name}.")

    def stop(self, session: str | None = None) -> None:
        with self._lock:
            self._check_owner(session, "stop")
            if self._state == "preparing" and self._preparing is not None:
                self._preparing.stop.set()
                self._set("stopping", "Stopping: the preparation stops at once while it learns the vocabulary, or "
                                      "once the data is read or the model built…")
                return
            if self._state not in ("running", "paused"):
                raise ValueError("Nothing is training, so nothing to stop.")
            self._run.trainer.stop()
            self._run.interrupt.set()  # an evaluation under way ends too
            self._set("stopping", "Stopping after the current step…")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the training thread to end; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()

    def refresh(self) -> ModelBundle | None:
        """Put the newest weights in the picker now (e.g. when the user selects the model)."""
        with self._lock:  # not while preparing: _run is still the last run then
            run = self._run if self._state in TRAINING and self._preparing is None else None
        return None if run is None else self._publish_latest(run)

    def save(self, name: str = "", session: str | None = None, which: str = "latest") -> Path:
        """Write the newest good weights (which="best": the best evaluation's, with keep_best) to
        checkpoints_dir/NAME-stepN or NAME-best-stepN (name sanitised, never replacing an existing folder);
        the last good snapshot after a NaN failure."""
        with self._lock:
            self._check_owner(session, "save")
            run, failed = self._run, self._state == "failed"
        if run is None:
            raise ValueError("Nothing to save yet: start a training run first.")
        if which == "best":
            return self._save_best(run, name)
        bundle, step = run.last_good, run.last_good_step
        if not failed:
            fresh = run.trainer.snapshot()
            if weights_finite(fresh):
                bundle, step = fresh, fresh.info["step"]  # the step it was taken at: the run goes on
        if bundle is None:
            raise ValueError("There are no good weights to save (the loss was NaN from the start).")
        saved = self._write(run, bundle, name, f"step{step}")
        run.saved = (step, saved.name)
        if run.settings.name in self.registry.names():  # the run's own entry: these weights, "saved as"
            self._publish(run, bundle)
        return saved

    def _save_best(self, run: _Run, name: str) -> Path:
        if not run.settings.keep_best:
            raise ValueError("This run keeps no best weights: choose a metric under \"keep best\" in the set-up "
                             "before starting a run, or save the latest.")
        if run.best is None:
            raise ValueError("No evaluation has been scored yet, so there is no best to save: save the latest, "
                             "or wait for the first evaluation.")
        return self._write(run, run.best, name, f"best-step{run.best.info['step']}")

    def _write(self, run: _Run, bundle: ModelBundle, name: str, suffix: str) -> Path:
        # Blank: the run's name. Cut so that the folder's whole name, with write_checkpoint's "-N" on a clash (4
        # characters), stays within limits.MAX_NAME_CHARS: a typed 64-character name made a 127-character folder.
        room = limits.MAX_NAME_CHARS - len(suffix) - 5
        stem = safe_name(name, fallback=safe_name(run.settings.name))[:room].strip(".-")
        base = f"{stem}-{suffix}"
        info = {"step": bundle.info["step"], "train": asdict(run.settings.train_config())}
        with self._saving:
            if self.public:
                info[limits.VISITOR_SAVE] = True
                self._make_room(run)
            saved = write_checkpoint(self.checkpoints_dir, bundle, base, info)
            run.saves += 1
        self.registry.add_folder(saved)  # offered in the picker at once, not after a restart
        return saved

    def _make_room(self, run: _Run) -> None:
        """On a public studio: refuse a run's save past limits.PUBLIC_SAVES_PER_RUN, and remove the oldest visitor
        saves (never a shipped checkpoint) so that this one keeps within the quota (its size: the run's last)."""
        if run.saves >= limits.PUBLIC_SAVES_PER_RUN:
            raise ValueError(f"This run has saved {run.saves} checkpoints, the most one run may save on this public "
                             f"studio ({limits.PUBLIC_SAVES_PER_RUN}); download the last one to keep it.")
        last = self.checkpoints_dir / run.saved[1] if run.saved else None
        incoming = folder_bytes(last) if last is not None and last.is_dir() else 0
        for removed in make_room(self.checkpoints_dir, incoming):
            for name in [n for n in self.registry.names() if self.registry.path_of(n) == removed]:
                self.registry.remove(name)

    def zip_saved(self, folder: Path) -> Path:
        """A .zip of a saved checkpoint to download (studio.train.downloads: only the newest is kept)."""
        return self._downloads.zip_checkpoint(folder)

    # ----- reading ------------------------------------------------------------------------
    def view(self) -> JobView:
        with self._lock:
            run = self._run
            if run is not None and self._message == PAUSING and self._state == "paused" and run.trainer.waiting:
                self._set("paused", f"Paused after step {run.trainer.step_count:,}; press Resume to go on.")
            preparing = self._preparing
            if run is None or preparing is not None:  # the last run's figures are not the new one's
                owner = preparing.owner if self.public and preparing is not None else None
                return JobView(self._version, self._state, self._message, None, {}, 0, 0, 0.0, None, [], [], [],
                               None, None, owner, self._runs)
            bundle = run.trainer.bundle
            src, tgt_in = run.example
            example = (bundle.target_tokenizer.tokens(tgt_in[1:]) + ["<eos>"], bundle.tokenizer.tokens(src))
            return JobView(self._version, self._state, self._message, run.settings, dict(run.facts),
                           run.trainer.step_count, run.settings.max_steps, run.elapsed(), self._eta(run),
                           list(run.history), list(run.evaluations), list(run.frames), example, run.last_good_step,
                           run.owner if self.public else None, self._runs)

    # ----- inside -------------------------------------------------------------------------
    def _set(self, state: str, message: str) -> None:
        """Change state; call with the lock held."""
        self._state, self._message = state, message
        self._version += 1

    def _need(self, state: str, refusal: str) -> _Run:
        if self._state != state or self._run is None:
            raise ValueError(refusal)
        return self._run

    def _eta(self, run: _Run) -> float | None:
        # The rate over the last ETA_WINDOW_S of training (at least 30 steps): over 30 steps alone, a
        # Multi30k run's estimate swung between 4 and 8 minutes within half a minute.
        # A bisection, not a scan: every page asks each second, and a long run's history holds every step.
        start = bisect.bisect_left(run.history, run.elapsed() - ETA_WINDOW_S, key=lambda r: r["seconds"])
        recent = run.history[min(start, max(0, len(run.history) - 30)):]
        if self._state != "running" or len(recent) < 2 or recent[-1]["seconds"] <= recent[0]["seconds"]:
            return None
        rate = (recent[-1]["step"] - recent[0]["step"]) / (recent[-1]["seconds"] - recent[0]["seconds"])
        eta = (run.settings.max_steps - run.trainer.step_count) / rate
        if self.public:  # the run ends at the time limit, whatever steps are left
            eta = min(eta, max(0.0, run.started + limits.PUBLIC_MAX_MINUTES * 60 - time.monotonic()))
        return eta

    def _publish_latest(self, run: _Run) -> ModelBundle | None:
        """Publish the run's current weights, unless they hold NaN/inf; returns them, or None."""
        snapshot = run.trainer.snapshot()
        if not weights_finite(snapshot):
            return None
        self._publish(run, snapshot)
        return snapshot

    def _publish(self, run: _Run, snapshot: ModelBundle, new_model: bool = False) -> None:
        """Offer snapshot in the picker and keep it as the last good weights. new_model: the run's
        first, which replaces any earlier run's model of the same name (a new registry key)."""
        step = snapshot.info["step"]  # when it was taken: the run may be further on by now
        saved_as = run.saved[1] if run.saved and run.saved[0] == step else None  # no step since the save
        with self._lock:  # the training thread and a page's refresh() publish: never an older over a newer
            if not new_model and run.last_good_step is not None and step < run.last_good_step:
                return
            self.registry.add(run.settings.name, snapshot, same_model=not new_model, saved_as=saved_as)
            self._names.add(run.settings.name)
            run.last_good, run.last_good_step = snapshot, step
            self._version += 1

    def _on_step(self, run: _Run, event: StepEvent) -> None:
        """Called by the trainer's thread between steps: visitors' requests waiting are served first."""
        priority.PRIORITY.yield_to_requests()
        record = {k: v for k, v in event.to_dict().items() if k != "validation"}
        record["seconds"] = run.elapsed()
        frame = None
        if event.step % run.frame_every == 0:
            frame = Frame(event.step, cross_attention(run.trainer.model, *run.example))
        if event.validation:
            snapshot = self._publish_latest(run)
            if event.validation.get("best") and snapshot is not None:
                run.best = snapshot
        with self._lock:
            run.history.append(record)
            if len(run.history) > MAX_POINTS:
                run.history = _thin(run.history, MAX_POINTS)
            if frame is not None:
                run.frames.append(frame)
                if len(run.frames) > MAX_FRAMES:
                    run.frames, run.frame_every = _thin(run.frames, MAX_FRAMES), 2 * run.frame_every
            if event.validation:
                metrics = {k: v for k, v in event.validation.items() if isinstance(v, (int, float))}
                samples = list(event.validation.get("samples", []))
                run.evaluations.append(Evaluation(event.step, record["seconds"], metrics, samples))
            self._version += 1

    def _train(self, run: _Run) -> None:
        try:
            run.trainer.run(lambda event: self._on_step(run, event))
        except _Interrupted:  # stopped during an evaluation (or an attention frame): ends as a stop does
            pass
        except TrainingStopped as exc:
            self._fail(run, f"{exc}.")
            return
        except Exception as exc:  # the thread's last stop, e.g. out of memory: keep the app and the weights
            log.exception("training failed")
            self._fail(run, f"Training failed ({type(exc).__name__}): {exc}")
            return
        self._finish(run)

    def _finish(self, run: _Run) -> None:
        run.ended = time.monotonic()
        self._publish_latest(run)
        stopped = run.trainer.stopped
        why = f" (this public studio's {limits.PUBLIC_MAX_MINUTES:.0f}-minute limit)" if run.time_up else ""
        with self._lock:
            self._set("stopped" if stopped else "finished",
                      f"{'Stopped' if stopped else 'Finished'} at step {run.trainer.step_count:,} after "
                      f"{run.elapsed():.0f} s{why}. The model stays in the picker; Save keeps it on disk.")

    def _fail(self, run: _Run, reason: str) -> None:
        run.ended = time.monotonic()
        self._publish_latest(run)
        with self._lock:
            kept = (f"The last good weights (step {run.last_good_step}) stay in the picker; Save writes them."
                    if run.last_good is not None else "No good weights were kept.")
            self._set("failed", f"{reason} {kept}")


def _ends_by_itself(run: _Run) -> str:
    return (f"It ends by itself at step {run.settings.max_steps:,} or {limits.PUBLIC_MAX_MINUTES:.0f} minutes "
            f"after it started.")
