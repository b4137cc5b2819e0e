"""The Train tab (studio/train/tab.py): mounted by the app; picking the live model fetches newer weights; the
buttons follow the run's state (a late reply too) and start, pause, resume, stop and save it; a new run
under the last one's name says it replaces it; the buttons get the browser's session from Gradio."""
from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pytest
import torch

from studio import shell
from studio.server.registry import ModelRegistry
from studio.train import live, tab
from studio.train.job import TrainingJob
from tests.helpers.jobs import QUICK, enabled, panel, sent, wait_for


def test_selecting_the_model_fetches_newer_weights(job):
    job.start(replace(QUICK, max_steps=10_000, eval_every=10_000))
    first = job.registry.get("live-numbers")
    wait_for(job, lambda v: v.step >= 3)
    tab.picked(job, "live-numbers")
    newer = job.registry.get("live-numbers")
    assert newer is not first and newer.info["step"] >= 3
    assert not torch.equal(newer.model.generator.weight, first.model.generator.weight)


def test_the_app_mounts_the_train_tab(tmp_path):
    from studio import app

    demo = app.build_app(ModelRegistry(None), checkpoints_dir=tmp_path)
    assert "Train" in {b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)}


class Page:
    """One browser page of the Train tab at the callback level, wired as the app wires it: the value
    and properties each component shows (a gr.State: what it holds), changed by an event's reply as
    Gradio changes them (gr.skip() leaves an output alone). A reply can be computed (call) and
    applied later (apply), as a busy machine delivers one after a newer tick's."""

    def __init__(self, job: TrainingJob, session: str = "lecturer"):
        from studio.shell import Shell

        with gr.Blocks() as demo:
            picker = gr.Dropdown(choices=[], value=None)
            with gr.Tab("Train") as train_tab:
                tab.build(Shell(job.registry, picker, demo, gr.State(None)), job, train_tab, gr.State(live.TAB_ID))
        self.fns = list(demo.fns.values())
        self.events = {fn.api_name: fn for fn in self.fns if fn.api_name}
        self.shown = {block._id: {"value": getattr(block, "value", None), "interactive": getattr(block, "interactive",
                                                                                                  None)}
                      for block in demo.blocks.values()}
        self.status_id = next(b._id for b in demo.blocks.values() if getattr(b, "elem_id", None) == "train-status")
        labels = {"Start": "start", "Pause": "pause", "Resume": "resume", "Stop": "stop", "Save checkpoint": "save"}
        self.buttons = {labels[b.value]: b._id for b in demo.blocks.values()
                        if isinstance(b, gr.Button) and b.value in labels}
        self.request = gr.Request(session_hash=session)

    def call(self, api_name: str) -> tuple:
        """The event's reply, computed now from what the page shows."""
        return self._reply(self.events[api_name])

    def _reply(self, fn) -> tuple:
        from gradio.helpers import special_args

        inputs, *_ = special_args(fn.fn, [self.shown[block._id]["value"] for block in fn.inputs], self.request)
        reply = fn.fn(*inputs)
        return reply if isinstance(reply, tuple) else (reply,) if fn.outputs else ()

    def apply(self, api_name: str, reply: tuple) -> None:
        self._apply(self.events[api_name], reply)

    def _apply(self, fn, reply: tuple) -> None:
        for block, value in zip(fn.outputs, reply, strict=True):
            if value == gr.skip():
                continue
            if isinstance(value, gr.components.Component):  # an update: the properties it was given
                self.shown[block._id].update(sent(value))
            else:
                self.shown[block._id]["value"] = value

    def run(self, api_name: str) -> None:
        self.apply(api_name, self.call(api_name))

    def click(self, api_name: str) -> None:
        """The event, then the events chained after it (.then), each reply applied before the next runs."""
        chain = [self.events[api_name]]
        while chain:
            fn = chain.pop(0)
            self._apply(fn, self._reply(fn))
            chain += [then for then in self.fns if then.trigger_after == fn._id]

    @property
    def status(self) -> str:
        return self.shown[self.status_id]["value"]

    @property
    def enabled(self) -> set[str]:
        return {name for name, block_id in self.buttons.items() if self.shown[block_id]["interactive"]}


def test_buttons_follow_the_jobs_state_and_pause_says_so_at_once(job):
    # Idle: nothing to pause or save.
    assert enabled(live.tick(job, None, 2, 0, live.Following(True), None, None)[8:13]) == {"start"}
    tab.start(job, *panel(max_steps=10_000))
    wait_for(job, lambda v: v.step >= 2)
    assert enabled(live.tick(job, None, 2, 0, live.Following(True), None, None)[8:13]) == {"pause", "stop", "save"}
    page = Page(job)
    page.click("train_pause")  # the status line and buttons come back with the click (the tick it sets off)
    assert "**Paused**" in page.status and "The step under way ends first" in page.status
    assert page.enabled == {"resume", "stop", "save"}
    view = wait_for(job, lambda v: "Paused after step" in v.message)  # then where it stopped
    assert f"Paused after step {view.step}; press Resume" in view.message
    page.click("train_resume")
    assert "**Training**" in page.status and page.enabled == {"pause", "stop", "save"}
    page.click("train_stop")
    assert page.enabled in ({"save"}, {"start", "save"})  # stopping, or stopped already
    wait_for(job, lambda v: v.state == "stopped")
    assert enabled(live.buttons(job.view())) == {"start", "save"}
    failed = replace(job.view(), state="failed", last_good_step=None)  # NaN from the first step: nothing to save
    assert enabled(live.buttons(failed)) == {"start"}


@pytest.mark.parametrize("action", ["pause", "resume", "stop"])
def test_a_late_reply_to_a_button_leaves_the_page_on_the_runs_true_state(job, action):
    """Issue 46: a button's reply reaching the page after the once-a-second tick had drawn a newer state
    (a busy machine) left the page on the older one for good ("Stopping after the current step…" with
    Start greyed out, after the run had stopped), since the tick sends nothing while the run is unchanged."""
    page = Page(job)
    job.start(replace(QUICK, max_steps=10_000))
    wait_for(job, lambda v: v.step >= 2)
    if action == "resume":
        job.pause()
        wait_for(job, lambda v: v.message.startswith("Paused after step"))
    page.run("train_view")
    late = page.call(f"train_{action}")  # the click's reply, computed at the click
    if action == "pause":  # the run moves on: it pauses after the step under way...
        wait_for(job, lambda v: v.message.startswith("Paused after step"))
    else:  # ...or it stops (resumed, then stopped by the time limit or another page)
        if action == "resume":
            job.stop()
        wait_for(job, lambda v: v.state == "stopped")
    page.run("train_view")  # a tick draws that
    page.apply(f"train_{action}", late)  # and the click's reply reaches the page after it
    page.run("train_view")
    fresh = Page(job)
    fresh.run("train_view")
    assert page.status == fresh.status and page.enabled == fresh.enabled
    expected = {"pause": ("**Paused**", f"Paused after step {job.view().step:,}", {"resume", "stop", "save"}),
                "resume": ("**Stopped**", "Stopped at step", {"start", "save"}),
                "stop": ("**Stopped**", "Stopped at step", {"start", "save"})}[action]
    assert page.status.startswith(expected[0]) and expected[1] in page.status and page.enabled == expected[2]


def test_callbacks_start_pause_resume_stop_save(job):
    picker, line, download = tab.start(job, *panel(max_steps=10_000))
    # Offered, not picked: the page keeps the model its user picked (issue 51) until "Use the live model".
    assert "value" not in picker.constructor_args and f"**{tab.USE_LIVE}**" in line
    assert picker.choices == [("live-numbers (unsaved)", "live-numbers")]
    assert tab.use_live(job, None).value == "live-numbers"
    assert download.visible is False  # the last save's line and download go together
    assert tab.fold_setup(line).open is False  # started: the set-up folds away for the curves
    refused = tab.start(job, *panel())[1]  # another run is going: this page's set-up stays open
    assert refused.startswith("**Not started:**") and tab.fold_setup(refused) == gr.skip()
    assert job.view().state == "running"  # the refused start left the run going
    wait_for(job, lambda v: v.step >= 2)
    tab.control(job, "pause")
    assert job.view().state == "paused"
    tab.control(job, "resume")
    assert job.view().state == "running"
    message, picker, download = tab.save(job, "demo", "live-numbers")
    assert "Saved **demo\\-step" in message and picker.value == "live-numbers"
    assert any(str(choice[0]).startswith("demo-step") for choice in picker.choices)  # (label, value) pairs
    # The live run's entry holds the weights just saved, and says where they are.
    labels = dict((value, label) for label, value in picker.choices)
    [saved] = [value for value in labels if value.startswith("demo-step")]
    assert labels["live-numbers"] == f"live-numbers (saved as {saved})" and labels[saved] == saved
    assert download.visible and download.value["path"].endswith(".zip") and "Download demo-step" in download.label
    tab.control(job, "stop")
    wait_for(job, lambda v: v.state == "stopped")
    # Stopped after more steps: the live model's newest weights are unsaved again.
    labels = dict((value, label) for label, value in shell.picker_update(job.registry, "live-numbers").choices)
    assert labels["live-numbers"] == ("live-numbers (unsaved)" if job.view().step > int(saved.split("step")[1])
                                      else f"live-numbers (saved as {saved})")
    with pytest.raises(gr.Error, match="Nothing is training"):  # nothing to pause: a refusal the API answers as one
        tab.control(job, "pause")
    message, _, download = tab.save(TrainingJob(ModelRegistry(None)), "x", None)
    assert "Not saved" in message and not download.visible


def test_a_new_run_under_the_last_runs_name_says_it_replaces_it(job, toasts):
    assert tab.start(job, *panel(max_steps=3))[1].startswith("*live\\-numbers is in the model picker")
    wait_for(job, lambda v: v.state == "finished")
    said = tab.start(job, *panel(max_steps=3))[1]
    assert said.startswith("*The earlier run called live\\-numbers is replaced by this one")
    assert tab.fold_setup(said).open is False  # it started: the set-up folds away all the same
    wait_for(job, lambda v: v.state == "finished")


def test_train_buttons_get_the_browser_session_from_gradio(job):
    from gradio.helpers import special_args

    from studio.server.guard import guard

    request = gr.Request(session_hash="abc")
    inputs, *_ = special_args(guard(tab.controller(job, "stop")), [], request)
    assert inputs == [request]  # Gradio passes gr.Request through the guard wrapper
    assert live.session_of(request) == "abc" and live.session_of(None) is None
