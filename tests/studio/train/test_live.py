"""The Train tab's live view (studio/train/live.py): a picked model removed meanwhile is unpicked, evaluations
read out now and then, a redraw only when something changed and only on screen, the timeline's scrub (left
alone by a tick already running), no figures of the last run while preparing, and the time left in words."""
from __future__ import annotations

from dataclasses import replace

import gradio as gr
import plotly.graph_objects as go
import pytest

from studio import shell
from studio.train import job as training
from studio.train import live
from studio.train import plots as train_plots
from studio.train import setup as run_setup
from tests.helpers.jobs import QUICK, enabled, sent, wait_for
from tests.helpers.studio import studio_bundle


def test_a_picked_model_removed_meanwhile_is_unpicked(job):
    """Picker choices without the picked name kept it as the page's value: Gradio then refused every event
    reading the picker ("Value: doomed is not in the list of choices"), the one-second tick included."""
    job.registry.add("doomed", studio_bundle())
    first = live.tick(job, None, 2, 0, live.Following(True), "doomed", None)
    assert "value" not in sent(first[-2])  # still offered: a pick made meanwhile is left alone
    job.registry.remove("doomed")  # an upload evicted, or a public studio's earlier run
    later = live.tick(job, first[0], 2, 0, live.Following(True), "doomed", None)
    assert sent(later[-2]) == {"choices": [], "value": None}
    assert sent(shell.picker_update(job.registry, "doomed"))["value"] is None


def test_evaluations_are_read_out_now_and_then_not_at_every_one():
    """A live run evaluates every second or two: a screen reader hears the newest at most every
    HEARD_EVERY_S seconds of training, a new run's first at once, and the last when the run ends."""
    def view(run, state, *evaluations):
        return training.JobView(7, state, "", None, {}, 0, 0, 0.0, None, [],
                                [training.Evaluation(step, seconds, {"val_loss": 1.5, "exact_match": 0.5}, [])
                                 for step, seconds in evaluations], [], None, None, run=run)

    first_look = live.Seen()
    assert live.evaluation_heard(view(1, "running", (50, 2.0)), first_look) == ("", (1, 50, 2.0))  # shown, not said
    seen = live.Seen(version=7, heard=(1, 50, 2.0))
    assert live.evaluation_heard(view(1, "running", (50, 2.0), (100, 4.0)), seen) == ("", (1, 50, 2.0))
    due = 2.0 + live.HEARD_EVERY_S
    said, heard = live.evaluation_heard(view(1, "running", (50, 2.0), (400, due)), seen)
    assert said == "Evaluation at step 400: validation loss 1.500, exact match 50%." and heard == (1, 400, due)
    heard_last = live.evaluation_heard(view(1, "finished", (50, 2.0), (100, 4.0)), seen)[0]
    assert heard_last.startswith("Evaluation at step 100")
    assert live.evaluation_heard(view(2, "running", (50, 1.0)), seen)[1] == (2, 50, 1.0)  # another run: at once
    assert live.evaluation_heard(view(1, "finished", (50, 2.0)), seen)[0] == ""  # heard already


def test_live_view_redraws_only_when_something_changed(job):
    first = live.tick(job, None, 2, 0, live.Following(True), None, None)
    assert isinstance(first[0], live.Seen) and "No training yet" in first[1]
    assert all(out == gr.skip() for out in live.tick(job, first[0], 2, 0, live.Following(True), None, None))
    job.start(replace(QUICK, name="<b>mine</b>"))
    view = wait_for(job, lambda v: v.state == "finished")
    assert first[-3] == gr.skip()  # the page's first look at the job is not read out
    seen, state, bar, curves, metrics, samples, layer, head, *buttons, timeline, attention, spoken, picker, key = (
        live.tick(job, first[0], 2, 1, live.Following(True), None, None))
    assert enabled(buttons) == {"start", "save"}  # finished
    assert spoken.startswith("Finished at step 30")  # a state changed since the last look: read out, once
    assert "Evaluation at step 30: validation loss" in spoken and "exact match" in spoken  # ...with its last one
    assert "&lt;b&gt;mine&lt;/b&gt;" in state and "<b>" not in state and "Finished" in state
    assert f'value="{view.step}"' in bar and "Step 30 of 30" in bar
    assert isinstance(curves, go.Figure) and len(curves.data) >= 9
    titles = [a.text for a in curves.layout.annotations]  # the subplots' titles: none wider than its panel
    assert titles[-1] == "Exact match / BLEU" and max(map(len, titles)) <= 25
    # The speed panel draws a running mean: step by step it swung 3k-22k tokens/s, noise on a projector.
    speed = next(t for t in curves.data if t.xaxis == "x5")
    raw = [h["tokens_per_s"] for h in view.history]
    window = train_plots.SPEED_WINDOW
    assert speed.y[-1] == pytest.approx(sum(raw[-window:]) / window) and speed.y[0] == raw[0]
    perplexity = curves.layout.yaxis2  # log axis: 1, 2, 5, 10, 20, 50 written in full, not D2's "5, 2, 10, 5"
    assert perplexity.type == "log" and perplexity.dtick is None and perplexity.tickformat == ",d"
    assert {1, 2, 5, 10, 20, 50, 100} <= set(perplexity.tickvals)
    narrow = curves.layout.meta["narrow"]  # on a phone: the six panels in one column, top to bottom
    tops = [narrow[f"yaxis{n or ''}.domain"][1] for n in (0, 2, 3, 4, 5, 6)]
    assert tops == sorted(tops, reverse=True) and all(narrow[f"xaxis{n}.domain"] == [0.0, 1.0] for n in (2, 6))
    assert "Evaluation at step 30" in metrics and "exact match" in metrics
    assert len([line for line in samples.splitlines() if line.startswith("| ")]) == 2 + run_setup.SAMPLES_SHOWN
    assert (layer.maximum, head.maximum, timeline.maximum, timeline.value) == (2, 4, 30, 30)
    assert "Step 30" in attention.layout.title.text and picker.choices == [("<b>mine</b> (unsaved)", "<b>mine</b>")]
    assert key == gr.skip()  # nothing picked: no key to renew
    again = live.tick(job, seen, 2, 1, live.Following(False), None, None)
    assert all(out == gr.skip() for out in again)


def test_the_plots_are_drawn_only_with_the_train_tab_on_screen(job, monkeypatch):
    # Redrawn every second on every page, whatever its tab, they slowed a lecturer's laptop several-fold.
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    with monkeypatch.context() as patched:  # not even built for a page on another tab
        patched.setattr(train_plots, "training_curves", lambda view: pytest.fail("curves built on another tab"))
        elsewhere = live.tick(job, None, 2, 1, live.Following(True), None, None, "translate")
    seen, state, _, curves, _, samples, *_, attention, _, _, _ = elsewhere
    assert "Finished" in state and curves == samples == attention == gr.skip()
    shown = live.tick(job, seen, 2, 1, live.Following(True), None, None, live.TAB_ID)  # the tab is opened
    assert isinstance(shown[3], go.Figure) and "| " in shown[5] and isinstance(shown[-4], go.Figure)
    assert shown[3].layout.uirevision == "run-1"  # a zoom into the curves stays while the run draws on
    ticked = live.tick(job, shown[0], 2, 1, live.Following(True), None, None, "translate")
    assert all(out == gr.skip() for out in ticked)


def test_timeline_scrubs_to_the_nearest_snapshot(job):
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    following = live.Following()
    figure, follow = live.scrub(job, following, 12, 1, 0)
    assert follow is False and figure.layout.title.text.startswith("Step 10: cross-attention, layer 1, mean of 4")
    assert not following.on
    assert "layer 2, head 4" in live.redraw(job, following, 0, 9, 9, True).layout.title.text  # clamped, latest
    assert following.on
    assert live.redraw(job, following, 0, 1, 1, False).layout.title.text.startswith("Step 0:")
    assert not following.on


def test_a_tick_already_running_leaves_a_scrub_alone(job, monkeypatch):
    """The user types a step while a tick, queued when the box still said "follow", is drawing:
    the tick must not put the newest snapshot back over the step asked for."""
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    following, draw = live.Following(), train_plots.training_attention

    def scrub_while_drawing(*args):
        monkeypatch.setattr(train_plots, "training_attention", draw)  # the scrub itself draws as usual
        live.scrub(job, following, 10, 1, 0)
        return draw(*args)

    monkeypatch.setattr(train_plots, "training_attention", scrub_while_drawing)
    *_, timeline, plot, spoken, picker, key = live.tick(job, None, 2, 0, following, None, None)
    assert plot == gr.skip() and "value" not in timeline.constructor_args  # neither the plot nor the slider's value


def test_while_preparing_the_view_shows_no_figures_of_the_last_run(job, monkeypatch):
    import threading

    job.start(replace(QUICK, max_steps=5))
    wait_for(job, lambda v: v.state == "finished")
    release, real_prepare = threading.Event(), training.prepare
    monkeypatch.setattr(training, "prepare",
                        lambda settings, public, check: release.wait(10) and real_prepare(settings, public, check))
    starting = threading.Thread(target=job.start, args=(replace(QUICK, name="second", max_steps=5),))
    starting.start()
    view = wait_for(job, lambda v: v.state == "preparing")
    assert view.settings is None and view.step == 0 and "building second" in view.message
    assert "Preparing" in live.status(view) and live.progress(view) == ""
    release.set()
    starting.join(300)
    wait_for(job, lambda v: v.state == "finished" and v.settings.name == "second")


def test_time_left_is_said_in_the_precision_it_has():
    assert live.time_left(401) == "about 7 min left" and live.time_left(120) == "about 2 min left"
    assert live.time_left(119) == "about 2 min left" and live.time_left(84) == "about 80 s left"
    assert live.time_left(44) == "about 40 s left"
    assert live.time_left(9.5) == "a few seconds left"
