"""The Train tab's live view: what a gr.Timer's tick draws about once a second from the
process-wide TrainingJob (status line, progress, curves, metrics, samples, the attention
timeline and which buttons act), redrawn only when something changed since this page last looked.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import partial

import gradio as gr
import plotly.graph_objects as go

from ..components import Slider
from ..server.guard import guard
from ..shell import Shell
from ..text import md, md_table
from . import plots
from .form import DEFAULTS, preset_values
from .job import ACTIVE, JobView, TrainingJob

TAB_ID = "train"
TICK_S = 1.0
STATE_WORDS = {"idle": "No training yet", "preparing": "Preparing", "running": "Training", "paused": "Paused",
               "stopping": "Stopping", "stopped": "Stopped", "finished": "Finished", "failed": "Failed"}
# The buttons (in the row's order) that make sense in each state of the job; the others are greyed out.
BUTTONS = ("start", "pause", "resume", "stop", "save")
ALLOWED = {"idle": {"start"}, "preparing": {"stop"}, "running": {"pause", "stop", "save"},
           "paused": {"resume", "stop", "save"}, "stopping": {"save"}, "stopped": {"start", "save"},
           "finished": {"start", "save"}, "failed": {"start", "save"}}


@dataclass(frozen=True)
class Seen:
    """What this browser session last drew: the job's version and the picker's (label, name) choices."""

    version: int = -1
    choices: tuple[tuple[str, str], ...] = ()
    state: str = ""
    heard: tuple[int, int, float] = (0, 0, 0.0)  # (run, step, seconds) of the evaluation last read out
    plotted: int = -1  # the version whose curves, samples and attention are drawn: only with this tab on screen


@dataclass
class Following:
    """Whether this session's attention timeline follows the training, held in a gr.State and
    changed in place: a tick reads it when it is about to draw, so one already running sees a scrub
    made meanwhile. (The checkbox reaches a tick with the value it had when the tick was queued; a
    tick in flight put the newest snapshot back over the step the user had just typed.)"""

    on: bool = True


# ----- what a tick draws -------------------------------------------------------------------
def status(view: JobView) -> str:
    """The status line: the state, the run's facts and its latest message."""
    if view.settings is None:
        return f"**{STATE_WORDS[view.state]}.** {md(view.message)}"
    f = view.facts
    return (f"**{STATE_WORDS[view.state]}** · {md(view.settings.name)} · {f['parameters']} parameters · "
            f"vocabulary {f['vocabulary']} · {md(f['pairs'])} pairs · {md(f['device'])}  \n{md(view.message)}"
            + (f"  \n**{md(f['notice'])}**" if f.get("notice") else ""))


def buttons(view: JobView, session: str | None = None) -> tuple[gr.Button, ...]:
    """Start, Pause, Resume, Stop and Save, each enabled only when it can act (Save: with good weights),
    and on a public studio only for the page that controls the run (session)."""
    allowed = ALLOWED[view.state] - ({"save"} if view.last_good_step is None else set())
    if view.owner is not None and session != view.owner:
        allowed &= {"start"}
    return tuple(gr.Button(interactive=name in allowed) for name in BUTTONS)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def time_left(seconds: float) -> str:
    """An estimate in the precision it has: whole minutes from 90 s, tens of seconds below."""
    if seconds >= 90:
        return f"about {round(seconds / 60)} min left"
    return f"about {max(10, round(seconds, -1)):.0f} s left" if seconds >= 10 else "a few seconds left"


def progress(view: JobView) -> str:
    """A progress bar with the step, the training time and the time left."""
    if view.settings is None:
        return ""
    eta = f" · {time_left(view.eta)}" if view.eta is not None else ""
    return (f'<progress max="{view.max_steps}" value="{view.step}" style="width:100%;height:22px"></progress>'
            f"<p>Step {view.step:,} of {view.max_steps:,} · {_clock(view.elapsed)} of training{eta}</p>")


def metrics(view: JobView) -> str:
    """The last evaluation's figures in one line."""
    if not view.evaluations:
        every = view.settings.eval_every if view.settings else None
        return f"*The first evaluation comes at step {every}.*" if every else ""
    e = view.evaluations[-1]
    parts = [f"**{p}**" if p.startswith("exact match") else p for p in _figures(e.metrics)]
    return f"**Evaluation at step {e.step}** ({_clock(e.seconds)}): " + " · ".join(parts)


def _figures(m: dict[str, float]) -> list[str]:
    """An evaluation's figures in words, those it has."""
    parts = [f"validation loss {m['val_loss']:.3f}" if "val_loss" in m else "",
             f"perplexity {m['val_perplexity']:.2f}" if "val_perplexity" in m else "",
             f"token accuracy {m['val_accuracy']:.1%}" if "val_accuracy" in m else "",
             f"exact match {m['exact_match']:.0%}" if "exact_match" in m else "",
             f"BLEU {m['bleu']:.1f}" if "bleu" in m else ""]
    return [p for p in parts if p]


# A live run evaluates every second or two: a screen reader hears the newest evaluation at most this
# often (seconds of training), and the last one when the run ends.
HEARD_EVERY_S = 15
HEARD_FIGURES = ("validation loss", "exact match", "BLEU")


def evaluation_heard(view: JobView, seen: Seen) -> tuple[str, tuple[int, int, float]]:
    """The newest evaluation in words if it is due to be read out ("" if not), and what seen.heard becomes."""
    if not view.evaluations:
        return "", seen.heard
    e = view.evaluations[-1]
    run, step, seconds = seen.heard
    new = view.run != run or e.step != step
    due = seen.version >= 0 and new and (view.run != run or e.seconds - seconds >= HEARD_EVERY_S
                                         or view.state not in ACTIVE)
    if not due and seen.version >= 0:
        return "", seen.heard
    # The page's first look shows the evaluation without reading it out, and counts it as heard.
    telling = [f for f in _figures(e.metrics) if f.startswith(HEARD_FIGURES)]  # the curves show the rest
    said = f"Evaluation at step {e.step:,}: " + ", ".join(telling) + "." if due else ""
    return said, (view.run, e.step, e.seconds)


NO_SAMPLES = "Validation samples (after the first evaluation)"


def samples(view: JobView) -> str:
    """The last evaluation's samples as a captioned Markdown table."""
    if not view.evaluations:
        return NO_SAMPLES
    rows = [[s["source"], s["reference"], s.get("teacher_forced", ""), s["output"],
             "✓" if s["output"] == s["reference"] else "✗"] for s in view.evaluations[-1].samples]
    # Not "translation": the Translate tab's output box is found by that label.
    return md_table(["source", "reference", "teacher-forced argmax", "model output", "="], rows,
                    caption=f"Validation samples at step {view.evaluations[-1].step}: the model's likeliest token at "
                            f"each place of the reference (teacher forcing, seed 004's preview), then greedy decoding")


def timeline_slider(view: JobView, follow: bool) -> gr.Slider:
    """The timeline reaching the latest snapshot, and set to it when following the training."""
    last = view.frames[-1].step if view.frames else 0
    spacing = max(1, view.settings.attention_every if view.settings else 1)
    kwargs = dict(value=last) if follow else {}
    return gr.Slider(minimum=0, maximum=max(last, spacing), step=spacing, **kwargs)


# job -> (version, {output name: what every session is shown}); weak: a job gone (tests, apps built again)
# takes its entry along, and a new job could otherwise be served a dead one's figures under a reused id().
_rendered: weakref.WeakKeyDictionary[TrainingJob, tuple[int, dict]] = weakref.WeakKeyDictionary()


def shared_outputs(job: TrainingJob, view: JobView, plotting: bool = True) -> tuple:
    """(status, progress, curves, metrics, samples, layer slider, head slider), each built once per version
    for every page (the buttons are each page's own: tick()). Without plotting, curves and samples are
    gr.skip(), and not built (this page does not show them; another page's tick builds them)."""
    cached = _rendered.get(job)
    if not (cached and cached[0] == view.version):
        shape = view.frames[-1].cross.shape if view.frames else (1, 1)
        # The layer slider starts at 1 and Gradio refuses maximum == minimum: at least 2
        # (plots.training_attention() clamps the layer to the model's).
        cached = (view.version, {"status": status(view), "progress": progress(view), "metrics": metrics(view),
                                 "layer": gr.Slider(maximum=max(shape[0], 2)),
                                 "head": gr.Slider(maximum=max(shape[1], 1))})
        _rendered[job] = cached
    built = cached[1]
    if plotting and "curves" not in built:
        built.update(curves=plots.training_curves(view), samples=samples(view))
    curves_, samples_ = (built["curves"], built["samples"]) if plotting else (gr.skip(), gr.skip())
    return (built["status"], built["progress"], curves_, built["metrics"], samples_, built["layer"],
            built["head"])


def tick(job: TrainingJob, seen: Seen | None, layer: float, head: float, following: Following, picked: str | None,
         model_key: tuple | None, on_screen: str = TAB_ID, session: str | None = None) -> tuple:
    """Everything the live view shows, or gr.skip() for each output when nothing changed; last, the
    picked model's registry key when it is not model_key: a run started (in any browser) under the
    picked name is another model, and the tabs that show the picked model redraw for it. Only a key of
    model_key's own name is renewed: a tick queued before the user picked another model carries the old
    name, and the picker's own change sets the new one's key. on_screen: the tab this page shows; the
    plots are drawn only on this one (redrawn every second on another tab, they slowed a lecturer's
    laptop: Translate took 3-5 s instead of under 1). session: this page, whose buttons act only where
    it may (buttons())."""
    seen = seen or Seen()
    view = job.view()
    # Labels change without names too ("saved as X" is "unsaved" again after the next evaluation).
    choices = tuple(job.registry.choices())
    key = job.registry.key(picked)
    renewed = key if (model_key is None or model_key[0] == picked) and key != model_key else gr.skip()
    plotting = on_screen == TAB_ID and view.version != seen.plotted
    if view.version == seen.version and choices == seen.choices and not plotting:
        return (*(gr.skip(),) * 17, renewed)
    # The value only when the picked model is gone (see shell.picker_update): set always, it would undo a
    # pick made while this tick was queued.
    gone = {} if picked in (name for _, name in choices) else {"value": None}
    picker = gr.Dropdown(choices=list(choices), **gone) if choices != seen.choices else gr.skip()
    shared = (*shared_outputs(job, view, plotting), *buttons(view, session))
    latest = plots.training_attention(view, None, layer, head) if following.on and plotting else None
    if following.on:  # asked again after drawing: the user may have scrubbed meanwhile
        timeline, plot = timeline_slider(view, True), latest if plotting else gr.skip()
    else:
        timeline, plot = timeline_slider(view, False), gr.skip()
    # Read out when the run's state changes (started, paused, finished, failed), not at every step, nor
    # on the page's first look at the job.
    # Each evaluation's figures too, at most every HEARD_EVERY_S: the curves and the progress bar are not.
    changed = seen.version >= 0 and view.state != seen.state
    word = STATE_WORDS[view.state]
    said = view.message if view.message.startswith(word) else f"{word}. {view.message}"  # not "Paused. Paused …"
    evaluation, heard = evaluation_heard(view, seen)
    said = " ".join(([said] if changed else []) + ([evaluation] if evaluation else []))
    spoken = md(said) if said else gr.skip()
    plotted = view.version if plotting else seen.plotted
    return (Seen(view.version, choices, view.state, heard, plotted), *shared, timeline, plot, spoken, picker, renewed)


def scrub(job: TrainingJob, following: Following, step: float, layer: float, head: float) -> tuple[go.Figure, bool]:
    """The user moved the timeline: show that snapshot and stop following the training."""
    following.on = False
    return plots.training_attention(job.view(), step, layer, head), False


def redraw(job: TrainingJob, following: Following, step: float, layer: float, head: float,
           follow: bool) -> go.Figure:
    """Another layer or head, or the follow box ticked or cleared: the snapshot drawn again."""
    following.on = follow
    return plots.training_attention(job.view(), None if follow else step, layer, head)



# ----- layout -----------------------------------------------------------------------------------
@dataclass
class LiveView:
    """The live view's components, and what this page holds between ticks."""

    status: gr.Markdown
    spoken: gr.Markdown
    progress: gr.HTML
    curves: gr.Plot
    metrics: gr.Markdown
    samples: gr.Markdown
    timeline: gr.Slider
    layer: gr.Slider
    head: gr.Slider
    follow: gr.Checkbox
    attention: gr.Plot
    seen: gr.State
    following: gr.State

    def outputs(self, button_row: list[gr.Button], shell: Shell) -> list:
        """tick()'s outputs, in the order it returns them."""
        return [self.seen, self.status, self.progress, self.curves, self.metrics, self.samples, self.layer,
                self.head, *button_row, self.timeline, self.attention, self.spoken, shell.model, shell.model_key]


def build_live_view() -> LiveView:
    """The status line (under the buttons), the progress bar, curves, metrics and samples, and the
    attention timeline; as for an idle job until the page's first tick."""
    status_line = gr.Markdown(elem_classes="status-line", elem_id="train-status")
    spoken = gr.Markdown(elem_classes=["announce", "visually-hidden"])  # the run's state, read out as it changes
    progress_bar = gr.HTML(elem_id="train-progress")
    curves = gr.Plot(label="Training curves", elem_id="train-curves")
    metrics_line = gr.Markdown()
    sample_table = gr.Markdown(NO_SAMPLES, elem_id="train-samples")
    gr.Markdown("### Attention timeline: one fixed test sentence, snapshotted while the model learns\n"
                "Its rows are the reference translation, fed to the decoder as in training (teacher forcing): "
                "they read right from the first step; what changes is where each one looks.")
    layers, _, heads, _, _ = preset_values(DEFAULTS.preset)
    every = DEFAULTS.attention_every
    with gr.Row():
        timeline = Slider(0, every, value=0, step=every, label="training step", scale=3)
        # Wide enough for their labels on one line beside the number box, presenter mode's type included.
        layer = Slider(1, layers, value=layers, step=1, label="decoder layer", min_width=260)
        head = Slider(0, heads, value=0, step=1, label="head (0: mean)", min_width=310)
        follow = gr.Checkbox(True, label="follow the training (latest snapshot)")
    attention = gr.Plot(label="Cross-attention of the fixed example")
    return LiveView(status_line, spoken, progress_bar, curves, metrics_line, sample_table, timeline, layer, head,
                    follow, attention, gr.State(Seen()), gr.State(Following()))


def session_of(request: gr.Request | None) -> str | None:
    """The browser session (page) a callback serves, from the gr.Request Gradio passes."""
    return getattr(request, "session_hash", None)


def watch(shell: Shell, job: TrainingJob, tab: gr.Tab, on_screen: gr.State, live: LiveView,
          button_row: list[gr.Button], redraw_after: list[gr.events.Dependency]) -> None:
    """Tick about once a second, on the page's load, when the tab is shown and after each of
    redraw_after (the Pause, Resume and Stop clicks); the timeline's own events draw the snapshot
    asked for.

    Only a tick draws the status line and the buttons, with the Seen that says what it drew: a
    reply that drew them too could reach the page after a newer tick's (a busy machine), and the
    tick, seeing no change since, left the page on the older state for good (issue #46)."""
    def tick_page(request: gr.Request, *values):
        return tick(job, *values, session=session_of(request))

    inputs = [live.seen, live.layer, live.head, live.following, shell.model, shell.model_key, on_screen]
    outputs = live.outputs(button_row, shell)
    gr.on([gr.Timer(TICK_S).tick, shell.demo.load], guard(tick_page), inputs=inputs, outputs=outputs,
          show_progress="hidden", api_name="train_view")
    # Drawn at once when the tab is shown, not at the next tick.
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden").then(
        guard(tick_page), inputs=inputs, outputs=outputs, show_progress="hidden")
    # After Pause, Resume or Stop at once (the timer took up to a second more), with no concurrency
    # limit: a click's answer never queues behind other sessions' ticks.
    for click in redraw_after:
        click.then(guard(tick_page), inputs=inputs, outputs=outputs, show_progress="hidden", concurrency_limit=None)
    timeline_and_view = [live.following, live.timeline, live.layer, live.head]
    live.timeline.input(guard(partial(scrub, job)), inputs=timeline_and_view, outputs=[live.attention, live.follow],
                        trigger_mode="always_last")
    gr.on([live.layer.input, live.head.input, live.follow.input], guard(partial(redraw, job)),
          trigger_mode="always_last", inputs=[*timeline_and_view, live.follow], outputs=live.attention)
