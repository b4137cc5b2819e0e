"""Train: set up a run, start/pause/resume/stop/save it, watch it learn (curves, progress,
sample translations, the attention forming) and use the model at once in the other tabs.

The run lives in the process-wide TrainingJob (studio/train/job.py); the set-up panel is
train_form's, the live view, which a gr.Timer redraws when something changed, train_live's.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import gradio as gr

from ..server.guard import guard
from ..server.limits import PUBLIC_MAX_MINUTES, PUBLIC_MAX_PARAMETERS
from ..shell import Shell, picker_update
from ..text import md, refusal, warn
from .form import FIELDS, NAMING, SetupPanel, build_setup, data_picked, settings_from, setup_of_the_run
from .job import JobBusy, TrainingJob
from .live import build_live_view, session_of, watch
from .setup import warm_up
from .sources import discard_upload_copy

NOT_STARTED = "**Not started:**"  # starts the line under the buttons when Start is refused
USE_LIVE = "Use the live model"  # the button that points every tab at the run's model


# ----- controls ----------------------------------------------------------------------------
def start(job: TrainingJob, *values, session: str | None = None) -> tuple:
    """Start a run: (the picker, offering the new model but keeping the one picked: a demo's live model must not
    answer the class's next German sentence; the line under the buttons; the last save's download, put away with
    its line). A refusal stays on that line, beside the set-up panel that can fix it; no toast: one covered the
    boxes it named (and one on a start, the progress bar)."""
    settings = None
    try:
        settings = settings_from(dict(zip(FIELDS, values)))
        replaced = settings.name in job.registry.names()  # start() refuses a name it did not make
        name = job.start(settings, session)
    except (JobBusy, ValueError) as exc:
        return gr.skip(), f"{NOT_STARTED} {md(str(exc).removeprefix('Cannot start: '))}", gr.skip()
    finally:
        if settings is not None:  # the corpus is read (or the start refused): its upload copy is done with
            discard_upload_copy(settings.data)
    # A large model's notice stays on the status line.
    said = (f"*The earlier run called {md(name)} is replaced by this one (a checkpoint saved from it keeps its own "
            f"name); give the next run another name to keep both.*") if replaced else ""
    said += f"{' ' if said else ''}*{md(name)} is in the model picker: **{USE_LIVE}** makes every tab use it.*"
    return gr.Dropdown(choices=job.registry.choices()), said, gr.DownloadButton(visible=False)


def use_live(job: TrainingJob, picked: str | None) -> gr.Dropdown:
    """The picker set to the model being trained (its newest weights), or left as it is with a warning."""
    view = job.view()
    if view.settings is None or view.settings.name not in job.registry.names():
        warn("No model is being trained yet: Start a run first.")
        return picker_update(job.registry, picked)
    job.refresh()
    return picker_update(job.registry, view.settings.name)


def controller(job: TrainingJob, action: str) -> Callable[[gr.Request], None]:
    """control() for one button, taking the browser session from Gradio."""
    def act(request: gr.Request) -> None:
        control(job, action, session_of(request))
    return act


def fold_setup(outcome: str) -> gr.Accordion:
    """Close the set-up panel once this page's run has started; left open after a refusal (outcome
    says it), to fix a value: another visitor's run going does not make this one started."""
    return gr.skip() if outcome.startswith(NOT_STARTED) else gr.Accordion(open=False)


def control(job: TrainingJob, action: str, session: str | None = None) -> None:
    """Pause, resume or stop the run (a warning when it cannot). The status line and the buttons are
    left to the tick that follows the click (train_live.watch): drawn here too, they could reach the
    page after a newer tick's drawing and hold it on an older state for good (issue #46)."""
    try:
        getattr(job, action)(session)
    except ValueError as exc:  # an error, not a warning: another visitor's run answers /train_stop with a refusal
        raise refusal(exc) from None


def save(job: TrainingJob, name: str, picked: str | None, session: str | None = None,
         which: str = "latest") -> tuple[str, gr.Dropdown, gr.DownloadButton]:
    """(message, the model picker with the saved checkpoint among its choices, its download). which:
    "latest" (the newest good weights) or "best" (the best evaluation's, when the run keeps it)."""
    try:
        path = job.save(name, session, which)
    except (ValueError, OSError) as exc:  # said on the line under the buttons, as a success is
        return f"**Not saved:** {md(exc)}", picker_update(job.registry, picked), gr.DownloadButton(visible=False)
    settings = job.view().settings
    kind = (f"the best evaluation's weights (by {settings.keep_best.replace('_', ' ')}), not the latest"
            if which == "best" and settings else "the latest weights")
    message = (f"Saved **{md(path.name)}**, {kind}, in {md(shown_path(path))}: it is in the model picker, and "
               f"`train_cli.py` takes it as `--checkpoint`.")
    try:
        archive = job.zip_saved(path)
    except OSError as exc:
        return (f"{message}  \n**No download:** the .zip could not be written ({md(exc)}).",
                picker_update(job.registry, picked), gr.DownloadButton(visible=False))
    size_mb = archive.stat().st_size / 2**20
    return (f"{message} Download it to keep it: *Open another checkpoint* (above, outside presenter mode) "
            f"opens the .zip again.",
            picker_update(job.registry, picked),
            gr.DownloadButton(f"Download {archive.name} ({size_mb:.1f} MB)", value=str(archive), visible=True))


def shown_path(path: Path) -> str:
    """Relative to the folder the studio runs in when inside it (what a user types), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def picked(job: TrainingJob, name: str | None) -> None:
    """Selecting the model being trained fetches its newest weights."""
    view = job.view()
    if view.settings is not None and name == view.settings.name:
        job.refresh()


# ----- layout ------------------------------------------------------------------------------
@dataclass
class Controls:
    """The row of buttons above the set-up panel, and the lines under it that answer them."""

    start: gr.Button
    pause: gr.Button
    resume: gr.Button
    stop: gr.Button
    save_name: gr.Textbox
    save_which: gr.Radio
    save: gr.Button
    outcome: gr.Markdown  # a refused start, a saved checkpoint: read out
    download: gr.DownloadButton  # the last saved checkpoint's .zip
    use_live: gr.Button  # every tab on the run's model, one click

    @property
    def row(self) -> list[gr.Button]:
        """The buttons in BUTTONS' order (train_live.buttons() says which act)."""
        return [self.start, self.pause, self.resume, self.stop, self.save]


def build(shell: Shell, job: TrainingJob, tab: gr.Tab, on_screen: gr.State) -> None:
    """on_screen: the id of the tab this page shows (the plots are drawn on this one only)."""
    controls = build_controls(job.public)
    # Below the buttons, which stay on screen; it folds away once a run starts.
    setup = build_setup()
    live = build_live_view()
    clicks = wire_controls(shell, job, controls, setup)
    shell.model.change(guard(partial(picked, job)), inputs=shell.model)
    shell.demo.load(warm_up)
    shell.demo.load(guard(partial(setup_of_the_run, job)), outputs=[*setup.inputs(), setup.accordion],
                    show_progress="hidden")
    watch(shell, job, tab, on_screen, live, controls.row, redraw_after=clicks)


def build_controls(public: bool) -> Controls:
    """The buttons as for an idle job (the page's first tick shows them as the job's state allows)."""
    # One row on a projector's 1280 px (short labels: narrower buttons), so the curves start higher.
    with gr.Row():
        start_button = gr.Button("Start", variant="primary", min_width=110)
        pause_button = gr.Button("Pause", interactive=False, min_width=110)
        resume_button = gr.Button("Resume", interactive=False, min_width=110)
        stop_button = gr.Button("Stop", variant="stop", interactive=False, min_width=110)
        save_name = gr.Textbox(label="Checkpoint name", show_label=False, container=False, max_lines=1, scale=2,
                               placeholder="Checkpoint name (saved as NAME-stepN)")  # blank: the model's
        save_which = gr.Radio([("latest", "latest"), ("best", "best")], value="latest", label="Which weights to save",
                              show_label=False,
                              container=False, scale=0, min_width=170)  # best: with "keep best by" in the set-up
        save_button = gr.Button("Save checkpoint", interactive=False, min_width=170)  # on one line
    if public:
        gr.Markdown(f"*A public studio: one training run at a time for every visitor. Only the page that "
                    f"starts a run can pause, resume, stop or save it, while it stays open (closed or reloaded, "
                    f"it leaves the run to everyone); a run ends {PUBLIC_MAX_MINUTES:.0f} minutes after it starts, "
                    f"and models have at most {PUBLIC_MAX_PARAMETERS / 1e6:.0f}M parameters.*")
    outcome = gr.Markdown(elem_classes="announce")
    download = gr.DownloadButton(visible=False)
    use = gr.Button(USE_LIVE, size="sm", variant="secondary")
    return Controls(start_button, pause_button, resume_button, stop_button, save_name, save_which, save_button,
                    outcome, download, use)


def wire_controls(shell: Shell, job: TrainingJob, controls: Controls, setup: SetupPanel) -> list[gr.events.Dependency]:
    """Start, Pause, Resume, Stop and Save; returns the Pause, Resume and Stop clicks. Gradio passes the
    browser session (gr.Request) to them: on a public studio only the session that started a run controls it."""
    def start_run(request: gr.Request, *values):
        return start(job, *values, session=session_of(request))

    def save_run(request: gr.Request, name: str, which: str, picked: str | None):
        return save(job, name, picked, session_of(request), which)

    def release_page(request: gr.Request) -> None:  # its session, from Gradio
        job.release(session_of(request))

    c = controls
    c.start.click(guard(start_run), inputs=setup.inputs(), outputs=[shell.model, c.outcome, c.download],
                  api_name="train_start").then(
        fold_setup, inputs=c.outcome, outputs=setup.accordion, show_progress="hidden").then(
        data_picked, inputs=setup.inputs(NAMING), outputs=setup.fields["name"], show_progress="hidden")
    # A public run's starter closing or reloading its page leaves the run to every visitor.
    shell.demo.unload(release_page)
    # A trivial call, so no concurrency limit: it never queues behind other sessions' redraws.
    clicks = [button.click(guard(controller(job, action)), api_name=f"train_{action}", concurrency_limit=None,
                           show_progress="hidden")
              for button, action in ((c.pause, "pause"), (c.resume, "resume"), (c.stop, "stop"))]
    c.save.click(guard(save_run), inputs=[c.save_name, c.save_which, shell.model],
                 outputs=[c.outcome, shell.model, c.download], api_name="train_save")
    c.use_live.click(guard(partial(use_live, job)), inputs=shell.model, outputs=shell.model, api_name=False,
                     show_progress="hidden")
    return clicks
