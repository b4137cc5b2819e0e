"""The Train tab's training job, one per process (studio/train/job.py): a run from start to finish (pause,
resume, stop, save), a new run under the picked name another model for every tab, the live run's schedule
on the Model tab, faults while building and NaN loss, a name another model holds, snapshots in order, a
public studio's bounded runs controlled by their starter, the time left, saved folders' names in the limit."""
from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import replace

import gradio as gr
import pytest
import torch

from core.checkpoint import load_checkpoint
from core.inference.translation import translate_detailed
from core.training.prepare import learn_tokenizers
from core.training.trainer import Trainer
from studio.server.registry import ModelRegistry
from studio.tabs import model_view
from studio.train import job as training
from studio.train import live, tab
from studio.train import setup as run_setup
from studio.train.job import JobBusy, TrainingJob
from tests.helpers.jobs import QUICK, enabled, same_output, wait_for
from tests.helpers.studio import studio_bundle


def test_run_pause_resume_finish_and_save(job):
    name = job.start(QUICK)
    assert name == "live-numbers" and job.registry.names() == ["live-numbers"]  # usable at once
    with pytest.raises(JobBusy, match="stop it before starting another"):
        job.start(QUICK)
    wait_for(job, lambda v: v.step >= 3)
    job.pause()
    # "paused" comes at once; the step in progress ends, then the message says where it stopped.
    paused = wait_for(job, lambda v: v.state == "paused" and v.message.startswith("Paused after step"))
    time.sleep(0.3)
    at = job.view().step
    time.sleep(0.3)
    assert job.view().step == at and paused.eta is None
    with pytest.raises(ValueError, match="already paused"):
        job.pause()
    job.resume()
    with pytest.raises(ValueError, match="already going"):
        job.resume()
    view = wait_for(job, lambda v: v.state == "finished")
    assert view.step == 30 and [h["step"] for h in view.history] == list(range(1, 31))
    assert {"loss", "perplexity", "accuracy", "lr", "tokens_per_s", "seconds"} <= set(view.history[0])
    assert [e.step for e in view.evaluations] == [10, 20, 30]
    assert {"val_loss", "exact_match", "bleu"} <= set(view.evaluations[-1].metrics)
    assert len(view.evaluations[-1].samples) == run_setup.SAMPLES_SHOWN
    assert [f.step for f in view.frames] == [0, 5, 10, 15, 20, 25, 30]
    rows, cols = view.example
    assert view.frames[-1].cross.shape == (2, 4, len(rows), len(cols))
    assert torch.allclose(torch.from_numpy(view.frames[-1].cross.sum(-1)), torch.ones(2, 4, len(rows)), atol=1e-4)
    live = job.registry.get("live-numbers")
    assert live.info["step"] == 30 and not live.model.training and live.device.type == "cpu"

    path = job.save("../../etc/my model <1>")  # sanitised, inside the checkpoints folder
    assert path.parent == job.checkpoints_dir and path.name == "etc-my-model-1-step30"
    assert job.save("../../etc/my model <1>").name == "etc-my-model-1-step30-2"  # never replaces
    assert {"etc-my-model-1-step30", "etc-my-model-1-step30-2"} <= set(job.registry.names())  # in the picker
    assert job.save("   ").name == job.save("🙂").name[:-2] == "live-numbers-step30"  # nothing usable: the run's
    saved = load_checkpoint(path)
    assert saved.info["step"] == 30 and saved.info["src_lang"] == "en" and saved.info["name"] == path.name
    # The finished run's own entry in the picker no longer says "(unsaved)": it names its last save.
    assert dict(job.registry.choices())["live-numbers (saved as live-numbers-step30-2)"] == "live-numbers"
    assert same_output(saved, live)


def test_stop_while_paused_and_start_again(job):
    job.start(replace(QUICK, max_steps=10_000))
    wait_for(job, lambda v: v.step >= 2)
    job.pause()
    job.stop()
    view = wait_for(job, lambda v: v.state == "stopped")
    assert view.step < 10_000 and "Stopped at step" in view.message
    time.sleep(0.05)
    assert job.view().elapsed == view.elapsed  # the clock stops with the run
    with pytest.raises(ValueError, match="nothing to stop"):
        job.stop()
    job.start(replace(QUICK, max_steps=3, name="second"))  # a finished or stopped run makes room
    wait_for(job, lambda v: v.state == "finished")
    assert job.registry.names() == ["live-numbers", "second"]


def test_a_new_run_under_the_picked_name_is_another_model_for_every_tab(job):
    """The picker keeps its value (no .change of its own): the registry key tells the tabs."""
    from studio.tabs import attention, beam, translate

    job.start(replace(QUICK, max_steps=10_000, eval_every=5))
    first = job.registry.key("live-numbers")
    current = translate.translate(job.registry, "live-numbers", "4 2", "greedy", 1, 0.6, 10, 1, 1.0, 0, 1.0, None)[4]
    search = beam.start(job.registry, "live-numbers", "4 2", 2, 0.6, "gnmt", 10)
    wait_for(job, lambda v: v.last_good_step >= 5)  # a newer snapshot of the same run: the same model
    tab.picked(job, "live-numbers")
    assert job.registry.key("live-numbers") == first and current.key == first
    assert live.tick(job, None, 2, 0, live.Following(True), "live-numbers", first)[-1] == gr.skip()
    assert beam._current(search, job.registry, "live-numbers", "4 2", 2, 0.6, "gnmt", 10) is search
    job.stop()
    wait_for(job, lambda v: v.state == "stopped")
    job.start(replace(QUICK, max_steps=3, layers=1))  # the same name, another model
    renewed = job.registry.key("live-numbers")
    assert renewed != first and renewed[0] == "live-numbers"
    # -> shell.model_key.change
    assert live.tick(job, None, 2, 0, live.Following(True), "live-numbers", first)[-1] == renewed
    # The user has picked another model (its key set by the picker); a tick queued before still names this one.
    assert live.tick(job, None, 2, 0, live.Following(True), "live-numbers", ("another model", 0))[-1] == gr.skip()
    analysis, title, *_ = attention.refresh(job.registry, current, (current, first), attention.TAB_ID, "live-numbers")
    assert analysis is None and "translated with an earlier run of live\\-numbers" in title
    ablated = attention.ablate(job.registry, current, "live-numbers", ["L1 H1"], [], [])  # said on the page
    assert "translated with an earlier run of live\\-numbers" in ablated
    again = beam._current(search, job.registry, "live-numbers", "4 2", 2, 0.6, "gnmt", 10)
    assert again is not search and again.stepper.model.config.encoder_layers == 1  # a new search
    wait_for(job, lambda v: v.state == "finished")


def test_the_model_tab_shows_the_live_runs_schedule(job):
    job.start(replace(QUICK, warmup=30, lr_factor=3.0, max_steps=600, eval_every=600))
    assert model_view.defaults(job.registry, "live-numbers") == (30, 600, QUICK.label_smoothing)
    _, _, _, lr, schedule, *_ = model_view.render(job.registry, "live-numbers", 30, 600, 0.1)
    d_model = job.registry.get("live-numbers").model.config.d_model
    assert max(lr.data[0].y) == pytest.approx(3.0 * d_model ** -0.5 * 30 ** -0.5, rel=0.01)  # as the run's
    assert "lr factor 3, warm-up 30 steps, 600 steps" in schedule


def test_errors_while_building_leave_the_app_usable(job, monkeypatch):
    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: not enough memory")

    monkeypatch.setattr(run_setup, "prepare_run", no_memory)
    with pytest.raises(ValueError, match="Cannot start: DefaultCPUAllocator"):
        job.start(QUICK)
    monkeypatch.undo()
    job.start(replace(QUICK, max_steps=2))
    assert wait_for(job, lambda v: v.state == "finished").step == 2


def test_nan_loss_stops_training_and_keeps_the_last_good_weights(job):
    job.start(replace(QUICK, max_steps=10_000, eval_every=5))
    wait_for(job, lambda v: v.last_good_step and v.last_good_step >= 5)
    job.pause()
    wait_for(job, lambda v: v.message.startswith("Paused after step"))  # the step under way has ended
    good = job.view().last_good_step
    with torch.no_grad():
        job._run.trainer.model.encoder_layers[0].ffn.w1.weight.fill_(math.nan)
    job.resume()
    view = wait_for(job, lambda v: v.state == "failed")
    assert "NaN" in view.message and f"last good weights (step {good})" in view.message
    assert view.last_good_step == good >= 5
    assert training.weights_finite(job.registry.get("live-numbers"))
    path = job.save("")
    assert path.name == f"live-numbers-step{good}" and training.weights_finite(load_checkpoint(path))


def test_a_name_taken_by_another_model_is_refused(tmp_path):
    registry = ModelRegistry(None)
    registry.add("shipped", studio_bundle())  # an entry the job did not make
    job = TrainingJob(registry, tmp_path)
    with pytest.raises(ValueError, match="'shipped' is already in the picker"):
        job.start(replace(QUICK, name="shipped"))
    assert registry.get("shipped") is studio_bundle()


def test_an_older_snapshot_never_replaces_a_newer_one(job):
    """The training thread and a page's refresh() both publish: the slower of the two could put older
    weights back in the picker, and the step published was read when publishing, not when taken."""
    job.start(replace(QUICK, max_steps=6))
    wait_for(job, lambda v: v.state == "finished")
    run = job._run
    newest = job.registry.get("live-numbers")
    older = run.trainer.snapshot()
    older.info["step"] = 2  # as if taken at step 2
    job._publish(run, older)
    assert job.registry.get("live-numbers") is newest and run.last_good is newest and run.last_good_step == 6
    job.save("kept")  # Save offers its snapshot under the run's name the same way
    assert job.registry.choices()[-1] == ("live-numbers (saved as kept-step6)", "live-numbers")


class ManualTimer:
    """threading.Timer's stand-in: fire() runs the function when the test says, not after a real delay
    (with a real one the test had 3 s to reach its pause before the time limit)."""

    made: list["ManualTimer"] = []

    def __init__(self, interval: float, function, args=()):
        self.fire, self.daemon = (lambda: function(*args)), False
        ManualTimer.made.append(self)

    def start(self) -> None:
        pass


def test_a_public_studio_bounds_runs_and_lets_only_their_starter_control_them(tmp_path, monkeypatch):
    monkeypatch.setattr(training.limits, "PUBLIC_MAX_MINUTES", 0.05)  # 3 s, pauses included
    monkeypatch.setattr(training.threading, "Timer", ManualTimer)
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints", public=True)
    with pytest.raises(ValueError, match=r"at most 10M parameters, and this one has 184.5M"):
        job.start(replace(QUICK, preset="paper-big"), "visitor")
    job.start(replace(QUICK, max_steps=10_000), "lecturer")
    view = job.view()  # each page's buttons: only the starter's Pause and Stop act
    assert enabled(live.buttons(view, "visitor")) == set()
    assert {"pause", "stop"} <= enabled(live.buttons(view, "lecturer"))
    for action in ("pause", "resume", "stop"):
        with pytest.raises(ValueError, match=f"started on another page; only that page can {action} it while"):
            getattr(job, action)("visitor")
    with pytest.raises(ValueError, match="only that page can save it"):
        job.save("mine", "visitor")
    view = wait_for(job, lambda v: v.eta is not None)
    assert view.eta <= 3.0  # 10,000 steps to go, but the run ends at the time limit
    with pytest.raises(JobBusy, match="It ends by itself at step 10,000 or 0 minutes after it started"):
        job.start(replace(QUICK, name="mine"), "visitor")
    job.pause("lecturer")
    ManualTimer.made[-1].fire()  # the run's time is up
    view = wait_for(job, lambda v: v.state == "stopped")  # the time limit ends even a paused run
    assert "this public studio's 0-minute limit" in view.message
    saved = job.save("kept", "lecturer").name
    job.start(replace(QUICK, name="next", max_steps=5), "visitor")
    names = job.registry.names()  # the previous live model leaves the picker; its saved copy stays
    assert "next" in names and saved in names and "live-numbers" not in names
    job.release("lecturer")  # a page that did not start this run closing changes nothing
    with pytest.raises(ValueError, match="only that page can save it"):
        job.save("x", "stranger")
    job.wait(300)
    assert enabled(live.buttons(job.view(), "stranger")) == {"start"}
    job.release("visitor")  # its starter's page closed (or reloaded): anyone may act on the run now
    assert enabled(live.buttons(job.view(), "stranger")) == {"start", "save"}
    assert job.save("theirs", "stranger").name.startswith("theirs-step")
    job.wait(300)


def test_time_left_follows_the_pace_of_the_last_two_minutes():
    from types import SimpleNamespace

    job = TrainingJob(ModelRegistry(None))
    job._state = "running"
    # 390 s at 1 step/s, then a burst of 30 s at 5 steps/s: over the last 120 s, 240 steps, 2 a second
    # (the last 30 points alone would say 5, and the estimate would drop to 92 s).
    history = [{"step": t, "seconds": t} for t in range(390)]
    history += [{"step": 390 + 5 * t, "seconds": 390 + t} for t in range(31)]
    run = SimpleNamespace(history=history, elapsed=lambda: 420.0, settings=SimpleNamespace(max_steps=1000),
                          trainer=SimpleNamespace(step_count=540))
    assert job._eta(run) == pytest.approx(460 / 2)
    run.history = history[:10]  # fewer than the window's worth: every point counts
    run.elapsed = lambda: 9.0
    assert job._eta(run) == pytest.approx((1000 - 540) / 1)


def test_a_saved_checkpoints_folder_name_keeps_to_the_name_limit(job):
    from studio.server.limits import MAX_NAME_CHARS

    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    first, second = job.save("n" * MAX_NAME_CHARS), job.save("n" * MAX_NAME_CHARS)  # the second: a "-2" on the clash
    assert first != second and max(len(first.name), len(second.name)) <= MAX_NAME_CHARS
    assert first.name.startswith("nnnn") and first.name.endswith(f"-step{job.view().step}")


# ----- issue 67: a run's preparation bounded, and Stop that waits for no evaluation --------------------------------
class SlowVocabulary:
    """run_setup.learn_tokenizers' stand-in: it learns once the test lets it (a long BPE), says where it ran, and
    whether the learning itself was stopped (by the check it was given, as it read the texts)."""

    def __init__(self, monkeypatch):
        self.learning, self.release, self.where = threading.Event(), threading.Event(), {}
        self.stopped_inside = False
        real = learn_tokenizers

        def learn(corpus, plan, check=None):
            native = threading.get_native_id()
            self.where.update(thread=threading.current_thread().name,
                              nice=os.getpriority(os.PRIO_PROCESS, native) if hasattr(os, "getpriority") else None)
            self.learning.set()
            self.release.wait(30)
            try:
                return real(corpus, plan, check)
            except run_setup.PreparationStopped:
                self.stopped_inside = True
                raise
        monkeypatch.setattr(run_setup, "learn_tokenizers", learn, raising=False)


def start_in_background(job: TrainingJob, settings, session: str | None = None) -> dict:
    """job.start in a thread of its own: what it returned or raised, under "said", once it has."""
    outcome: dict = {}

    def start() -> None:
        try:
            outcome["said"] = job.start(settings, session)
        except ValueError as exc:
            outcome["said"] = exc
    outcome["thread"] = threading.Thread(target=start, daemon=True)
    outcome["thread"].start()
    return outcome


def test_a_runs_preparation_trains_at_low_priority_and_stops_when_asked(job, monkeypatch):
    vocabulary = SlowVocabulary(monkeypatch)
    outcome = start_in_background(job, replace(QUICK, max_steps=10_000))
    assert vocabulary.learning.wait(20)
    assert vocabulary.where["thread"] == "studio-training"  # not the request's: the training thread's priority
    if vocabulary.where["nice"] is not None:
        assert vocabulary.where["nice"] >= training.TRAIN_NICE
    assert enabled(live.buttons(job.view())) == {"stop"}
    job.stop()  # not "Nothing is training"
    assert job.view().state == "stopping"
    vocabulary.release.set()
    outcome["thread"].join(60)
    assert isinstance(outcome["said"], ValueError)
    assert str(outcome["said"]) == "Cannot start: live-numbers was stopped while it was being prepared; nothing " \
                                   "was trained."
    assert vocabulary.stopped_inside  # Tokenizer.train's own check, not the one after its stage
    view = job.view()
    assert view.state == "idle" and "stopped while it was being prepared" in view.message
    assert "live-numbers" not in job.registry.names()
    assert job.start(replace(QUICK, max_steps=2)) == "live-numbers"  # the next Start is served
    assert wait_for(job, lambda v: v.state == "finished").step == 2


def test_a_public_runs_time_limit_counts_its_preparation(tmp_path, monkeypatch):
    monkeypatch.setattr(training.threading, "Timer", ManualTimer)
    vocabulary = SlowVocabulary(monkeypatch)
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints", public=True)
    outcome = start_in_background(job, QUICK, "lecturer")
    assert vocabulary.learning.wait(20)
    with pytest.raises(ValueError, match="started on another page; only that page can stop it"):
        job.stop("visitor")
    ManualTimer.made[-1].fire()  # its 15 minutes are up before it trains
    vocabulary.release.set()
    outcome["thread"].join(60)
    assert "stopped while it was being prepared (this public studio's 15-minute limit)" in str(outcome["said"])
    assert job.view().state == "idle"


def test_stop_does_not_wait_for_an_evaluation_under_way(job, monkeypatch):
    evaluating, real = threading.Event(), Trainer.validation_loss

    def endless_evaluation(trainer):  # a validation that would take a minute (each pass a forward of the model)
        evaluating.set()
        began = time.monotonic()
        while time.monotonic() - began < 60:
            real(trainer)
        return real(trainer)
    monkeypatch.setattr(Trainer, "validation_loss", endless_evaluation)
    job.start(replace(QUICK, max_steps=10_000, eval_every=3))
    assert evaluating.wait(60)
    job.stop()
    assert wait_for(job, lambda v: v.state == "stopped", 10).step == 3
    job.wait(10)
    assert job.view().state == "stopped"
    assert translate_detailed(job.registry.get("live-numbers"), ["4 2"], method="greedy")  # its snapshot still serves
