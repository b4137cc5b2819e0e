"""Train: set up a run, start/pause/resume/stop/save it, watch it learn (curves, progress,
sample translations, the attention forming) and use the model at once in the other tabs.

The run lives in the process-wide TrainingJob (studio/training.py); a gr.Timer reads its
state about once a second and redraws only when something changed.
"""
from __future__ import annotations

import itertools
import math
import os
import weakref
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.config import PRESETS
from core.data import TSV_COLUMNS, hub_offline
from core.schedule import noam_lr
from core.tasks import TASKS

from .. import plots
from ..limits import MAX_NAME_CHARS, PUBLIC_MAX_MINUTES, PUBLIC_MAX_PARAMETERS, clean_input
from ..shell import Shell, picker_update
from ..sources import ROOT, SOURCES, UPLOAD_COPY_PREFIX, corpus_spec, discard_upload_copy
from ..text import guard, md, md_table, warn
from ..training import ACTIVE, JobBusy, JobView, Settings, TrainingJob, device_line, safe_name, warm_up
from ..widgets import Slider

TICK_S = 1.0
DEFAULTS = Settings()
# The set-up panel's inputs, in the order the callbacks receive them.
FIELDS = ("kind", "task", "path", "upload", "hf_name", "src_lang", "tgt_lang", "limit", "name", "preset",
          "layers", "d_model", "n_heads", "d_ff", "dropout", "vocab_size", "max_steps", "warmup", "lr_factor",
          "label_smoothing", "max_tokens", "clip_norm", "eval_every", "attention_every")
# The studio sets HF_HUB_OFFLINE=1 unless told otherwise: then only cached datasets load.
HF_LABEL_OFFLINE = ("Hugging Face dataset: only one already in this machine's Hugging Face cache (the studio runs "
                    "offline, HF_HUB_OFFLINE=1)")
HF_LABEL_ONLINE = "Hugging Face dataset (downloaded from huggingface.co, or a cached copy)"
STATE_WORDS = {"idle": "No training yet", "preparing": "Preparing", "running": "Training", "paused": "Paused",
               "stopping": "Stopping", "stopped": "Stopped", "finished": "Finished", "failed": "Failed"}
CURVES = (("Loss (label-smoothed)", "loss", "val_loss"), ("Perplexity", "perplexity", "val_perplexity"),
          ("Token accuracy", "accuracy", "val_accuracy"), ("Learning rate", "lr", None),
          ("Target tokens/s, smoothed", "tokens_per_s", None), ("Exact match / BLEU", None, None))  # validation
# Points the speed curve averages over: step by step it swung between 3k and 22k tokens/s (batches of
# different lengths, evaluations, other users), which on a projector reads as noise.
SPEED_WINDOW = 20
# The synthetic tasks' labels in the picker, short enough for its box (presenter mode included); core's
# full description of the picked task shows below it.
TASK_LABELS = {"copy": "copy 3-10 letters", "reverse": "reverse 3-10 letters", "sort": "sort 3-10 letters",
               "numbers": "English numbers → German words", "dates": "dates in six formats → ISO 8601"}
# The buttons (in the row's order) that make sense in each state of the job; the others are greyed out.
BUTTONS = ("start", "pause", "resume", "stop", "save")
ALLOWED = {"idle": {"start"}, "preparing": set(), "running": {"pause", "stop", "save"},
           "paused": {"resume", "stop", "save"}, "stopping": {"save"}, "stopped": {"start", "save"},
           "finished": {"start", "save"}, "failed": {"start", "save"}}
NOT_STARTED = "**Not started:**"  # starts the line under the buttons when Start is refused
PERPLEXITY_TICKS = [m * 10 ** e for e in range(6) for m in (1, 2, 5)]  # 1 to 500,000: any vocabulary


TAB_ID = "train"


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


# ----- set-up ------------------------------------------------------------------------------
# The number boxes carry no Gradio bounds: Gradio's own refusal ("Value -5 is less than minimum
# value 1.") does not say which box; these messages do.
def _int(value, name: str, low: int = 1) -> int:
    try:
        number = float(value)
        ok = number == int(number) and number >= low
    except (TypeError, ValueError, OverflowError):  # empty, text, infinite
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a whole number of at least {low}, got {_shown(value)}")
    return int(number)


def _float(value, name: str, high: float = math.inf, above_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not ((number > 0 if above_zero else number >= 0) and number <= high):
        bounds = "above 0" if above_zero else f"from 0 to {high}" if high < math.inf else "of at least 0"
        raise ValueError(f"{name} must be a number {bounds}, got {_shown(value)}")
    return number


def _shown(value) -> str:
    return "an empty box" if value is None or str(value).strip() == "" else repr(value)


def run_name(values: dict) -> str:
    """The name typed, or while the box holds a default (blank or live-...), the data's own: a pasted path
    could reach Start before the box had followed it, and the run would take the last data's name."""
    typed = clean_input(values["name"], MAX_NAME_CHARS)[0].strip()
    if typed and not typed.startswith("live-"):
        return typed
    return default_name(values["kind"], values["task"], values["path"], values["upload"], values["hf_name"])


def settings_from(values: dict) -> Settings:
    """The panel's values -> Settings; ValueError names a bad field."""
    v = values
    limit = _int(v["limit"], "training pairs", 0) if v["limit"] not in (None, "") else 0
    fields = dict(
        src_lang=clean_input(v["src_lang"], 32)[0].strip() or None,  # language codes: short
        tgt_lang=clean_input(v["tgt_lang"], 32)[0].strip() or None,
        limit=limit or None, name=run_name(v),
        preset=v["preset"],
        layers=_int(v["layers"], "layers"), d_model=_int(v["d_model"], "d_model", 2),
        n_heads=_int(v["n_heads"], "heads"), d_ff=_int(v["d_ff"], "d_ff"),
        dropout=_float(v["dropout"], "dropout", 0.9),
        vocab_size=_int(v["vocab_size"], "vocabulary size", 8), max_steps=_int(v["max_steps"], "steps"),
        warmup=_int(v["warmup"], "warm-up steps"), lr_factor=_float(v["lr_factor"], "lr factor", above_zero=True),
        label_smoothing=_float(v["label_smoothing"], "label smoothing", 0.9),
        max_tokens=_int(v["max_tokens"], "max tokens", 16),
        clip_norm=_float(v["clip_norm"], "gradient clipping"), eval_every=_int(v["eval_every"], "evaluate every"),
        attention_every=_int(v["attention_every"], "attention snapshot every"))
    data = corpus_spec(v["kind"], v["task"], v["path"], v["upload"], v["hf_name"])  # last: it may copy an upload
    try:
        return Settings(data=data, **fields)
    except BaseException:
        discard_upload_copy(data)
        raise


def preset_values(preset: str) -> tuple:
    """(layers, d_model, heads, d_ff, dropout) of a preset, to fill the override fields."""
    p = PRESETS[preset]
    return p["encoder_layers"], p["d_model"], p["n_heads"], p["d_ff"], p["dropout"]


def data_fields(data: str) -> tuple:
    """A run's corpus spec -> the panel's (kind, task, path, upload, hf_name). An uploaded file cannot
    be offered again: its source is picked with the box empty."""
    scheme, _, rest = data.partition(":")
    task, path, hf_name = DEFAULTS.data.split(":")[1], "", ""
    if scheme == "synthetic":
        return SOURCES[0], rest, path, None, hf_name
    if scheme == "hf":
        return SOURCES[3], task, path, None, rest
    columns = TSV_COLUMNS.fullmatch(rest)  # PATH.tsv[.gz]:LANG1-LANG2
    folder, languages = (columns[1], f":{columns[2]}-{columns[3]}") if columns else (rest, "")
    if Path(folder).parent.name.startswith(UPLOAD_COPY_PREFIX):
        return SOURCES[2], task, path, None, hf_name
    return SOURCES[1], task, os.path.relpath(folder, ROOT) + languages, None, hf_name


def form_values(settings: Settings) -> tuple:
    """A run's settings as the set-up panel's values (FIELDS' order): a page opened during a run shows
    the run's, not the defaults under its status line (settings_from reads them back)."""
    s = asdict(settings)
    chosen = dict(zip(("layers", "d_model", "n_heads", "d_ff", "dropout"), preset_values(settings.preset)))
    chosen.update({k: s[k] for k in chosen if s[k] is not None})
    values = {**s, **chosen, "src_lang": s["src_lang"] or "", "tgt_lang": s["tgt_lang"] or "",
              "limit": s["limit"] or 0}
    return (*data_fields(settings.data), *(values[f] for f in FIELDS[5:]))


def setup_of_the_run(job: TrainingJob) -> tuple:
    """On a page's load: the set-up panel shows the job's run, folded as after Start; none: left as built."""
    settings = job.view().settings
    if settings is None:
        return (gr.skip(),) * (len(FIELDS) + 1)
    return (*form_values(settings), gr.Accordion(open=False))


def peak_lr(d_model, warmup, factor) -> str:
    """Eq. 3's peak, reached at step = warmup."""
    try:
        factor, d_model, warmup = float(factor), float(d_model), float(warmup)
    except (TypeError, ValueError):  # a box being typed into
        return ""
    if not (factor > 0 and d_model > 0 and warmup > 0):  # Start refuses these, and says why
        return "Peak learning rate (eq. 3): the lr factor, d_model and warm-up must all be above 0."
    lr = noam_lr(warmup, d_model, warmup, factor)
    return f"Peak learning rate (eq. 3, at step {int(warmup)}): factor · d_model^−0.5 · warmup^−0.5 = **{lr:.2e}**"


def task_described(task: str) -> gr.Dropdown:
    """The task picker with the picked task's full description below it."""
    return gr.Dropdown(info=TASKS[task].description if task in TASKS else "")


def default_name(kind: str, task: str, path: str | None, upload: str | None, hf_name: str | None) -> str:
    """The model's name in the picker for a data choice, live-<task, corpus, file or dataset>: a Multi30k
    model called live-numbers would pass for the numbers task's on every tab."""
    if kind == SOURCES[0]:
        base = task
    elif kind == SOURCES[1]:
        base = (path or "").strip().rstrip("/").split(":")[0].rsplit("/", 1)[-1]
    elif kind == SOURCES[2]:
        base = Path(upload).name if upload else ""
    else:
        base = (hf_name or "").split(":")[0].rsplit("/", 1)[-1]
    base = base.removesuffix(".gz").removesuffix(".tsv").removesuffix(".txt")
    return f"live-{safe_name(base[:60], fallback='model')}"


def data_picked(kind: str, task: str, path: str | None, upload: str | None, hf_name: str | None,
                name: str | None):
    """The name box follows the data while it holds a default name (blank or live-...); a name the
    user typed stays."""
    current = (name or "").strip()
    if current and not current.startswith("live-"):
        return gr.skip()
    return default_name(kind, task, path, upload, hf_name)


def source_visibility(kind: str) -> tuple:
    return tuple(gr.update(visible=kind == k) for k in SOURCES)


# ----- controls ----------------------------------------------------------------------------
def start(job: TrainingJob, *values, session: str | None = None):
    """Start a run: (the picker, with the new model selected; the line under the buttons; the last
    save's download, put away with its line). A refusal stays on that line, beside the set-up panel
    that can fix it; no toast: one covered the boxes it named (and one on a start, the progress bar)."""
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
    # A large model's notice stays on the status line; the picker shows the new model.
    said = (f"*The earlier run called {md(name)} is replaced by this one (a checkpoint saved from it keeps its own "
            f"name); give the next run another name to keep both.*") if replaced else ""
    return picker_update(job.registry, name), said, gr.DownloadButton(visible=False)


def session_of(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None)


def controller(job: TrainingJob, action: str):
    """control() for one button, taking the browser session from Gradio."""
    def act(request: gr.Request) -> tuple:
        return control(job, action, session_of(request))
    return act


def fold_setup(outcome: str) -> gr.Accordion:
    """Close the set-up panel once this page's run has started; left open after a refusal (outcome
    says it), to fix a value: another visitor's run going does not make this one started."""
    return gr.skip() if outcome.startswith(NOT_STARTED) else gr.Accordion(open=False)


def control(job: TrainingJob, action: str, session: str | None = None) -> tuple:
    """Pause, resume or stop the run; (status line, buttons) at once, not at the timer's next tick."""
    try:
        getattr(job, action)(session)
    except ValueError as exc:
        warn(exc)
    view = job.view()
    return status(view), *buttons(view, session)


def save(job: TrainingJob, name: str, picked: str | None,
         session: str | None = None) -> tuple[str, gr.Dropdown, gr.DownloadButton]:
    """(message, the model picker with the saved checkpoint among its choices, its download)."""
    try:
        path = job.save(name, session)
    except (ValueError, OSError) as exc:  # said on the line under the buttons, as a success is
        return f"**Not saved:** {md(exc)}", picker_update(job.registry, picked), gr.DownloadButton(visible=False)
    message = (f"Saved **{md(path.name)}** in {md(shown_path(path))}: it is in the model picker, and "
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


# ----- the live view -----------------------------------------------------------------------
def status(view: JobView) -> str:
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
    if view.settings is None:
        return ""
    eta = f" · {time_left(view.eta)}" if view.eta is not None else ""
    return (f'<progress max="{view.max_steps}" value="{view.step}" style="width:100%;height:22px"></progress>'
            f"<p>Step {view.step:,} of {view.max_steps:,} · {_clock(view.elapsed)} of training{eta}</p>")


def curves(view: JobView) -> go.Figure:
    """Train (line) and validation (dots) curves against the step, one panel per quantity."""
    if not view.history:
        return plots.empty("Press Start: the curves appear with the first steps.", 520)
    fig = make_subplots(rows=2, cols=3, subplot_titles=[c[0] for c in CURVES], shared_xaxes="all",
                        horizontal_spacing=0.07, vertical_spacing=0.12)
    steps = [h["step"] for h in view.history]
    evals = view.evaluations
    for i, (_, train_key, valid_key) in enumerate(CURVES):
        row, col = divmod(i, 3)
        if train_key:
            values = [h[train_key] for h in view.history]
            if train_key == "tokens_per_s":
                values = running_mean(values, SPEED_WINDOW)
            fig.add_trace(go.Scatter(x=steps, y=values, mode="lines", name="train",
                                     line=dict(color="#1b6ca8", width=1.5), showlegend=i == 0,
                                     legendgroup="train"), row=row + 1, col=col + 1)
        if valid_key and evals:
            fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.metrics.get(valid_key) for e in evals],
                                     mode="lines+markers", name="validation", line=dict(color="#d95f02"),
                                     showlegend=i == 0, legendgroup="valid"), row=row + 1, col=col + 1)
    if evals:
        for key, color, name in (("exact_match", "#1a9850", "exact match"), ("bleu", "#762a83", "BLEU / 100")):
            scale = 0.01 if key == "bleu" else 1.0
            fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.metrics.get(key, 0) * scale for e in evals],
                                     mode="lines+markers", name=name, line=dict(color=color)), row=2, col=3)
        fig.update_yaxes(range=[0, 1.02], row=2, col=3)
    # 1, 2, 5 per decade, each written in full: plotly's "D2" wrote 20 and 50 as "2" and "5".
    fig.update_yaxes(type="log", tickvals=PERPLEXITY_TICKS, tickformat=",d", row=1, col=2)
    fig.update_yaxes(range=[0, 1.02], row=1, col=3)
    fig.update_yaxes(exponentformat="e", row=2, col=1)
    fig.update_xaxes(title=dict(text="step", standoff=6), row=2)
    # The legend above the panels, right-aligned: below them it crowded the step titles.
    # uirevision: a zoom into the curves stays while the run draws on (it snapped back within a second).
    fig.update_layout(legend=dict(orientation="h", x=1, xanchor="right", y=1.06, yanchor="bottom"),
                      margin=dict(l=60, r=30, t=80, b=50), height=560, template=plots.TEMPLATE,
                      uirevision=f"run-{view.run}")
    # On a phone, one panel under another, the legend above the first.
    plots.stacked(fig, 2, 3, 1150, vertical_spacing=0.06)
    plots.narrow(fig, **{"font.size": plots.NARROW_FONT, "margin.t": 125, "legend.x": 0, "legend.xanchor": "left",
                         "legend.y": 1.03})
    return fig


def running_mean(values: list[float], window: int) -> list[float]:
    """Each value averaged with the (up to) window - 1 before it."""
    sums = [0.0, *itertools.accumulate(values)]
    return [(sums[i + 1] - sums[max(0, i + 1 - window)]) / min(i + 1, window) for i in range(len(values))]


def metrics(view: JobView) -> str:
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
    rows = [[s["source"], s["reference"], s["output"], "✓" if s["output"] == s["reference"] else "✗"]
            for s in view.evaluations[-1].samples]
    # Not "translation": the Translate tab's output box is found by that label.
    return md_table(["source", "reference", "model output", "="], rows,
                    caption=f"Validation samples at step {view.evaluations[-1].step} (greedy decoding)")


def frame_at(view: JobView, step: float | None):
    """The attention snapshot nearest to step (the latest when step is None)."""
    if not view.frames:
        return None
    if step is None:
        return view.frames[-1]
    return min(view.frames, key=lambda f: abs(f.step - float(step)))


def attention(view: JobView, step: float | None, layer: float, head: float) -> go.Figure:
    """The fixed example's cross-attention at a step: one layer, one head (0: mean of heads)."""
    frame = frame_at(view, step)
    if frame is None or view.example is None:
        return plots.empty("Press Start: snapshots of the attention appear as the model trains.", 420)
    n_layers, n_heads = frame.cross.shape[:2]
    l = min(max(int(layer), 1), n_layers) - 1
    h = min(max(int(head), 0), n_heads)
    weights = frame.cross[l].mean(axis=0) if h == 0 else frame.cross[l, h - 1]
    which = f"mean of {n_heads} heads" if h == 0 else f"head {h}"
    rows, cols = view.example
    return plots.attention_head(weights, rows, cols, f"Step {frame.step}: cross-attention, layer {l + 1}, {which}",
                                "reference token<br>being predicted", "source token")


def timeline_slider(view: JobView, follow: bool) -> gr.Slider:
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
        # The layer slider starts at 1 and Gradio refuses maximum == minimum: at least 2 (attention()
        # clamps the layer to the model's).
        cached = (view.version, {"status": status(view), "progress": progress(view), "metrics": metrics(view),
                                 "layer": gr.Slider(maximum=max(shape[0], 2)),
                                 "head": gr.Slider(maximum=max(shape[1], 1))})
        _rendered[job] = cached
    built = cached[1]
    if plotting and "curves" not in built:
        built.update(curves=curves(view), samples=samples(view))
    curves_, samples_ = (built["curves"], built["samples"]) if plotting else (gr.skip(), gr.skip())
    return (built["status"], built["progress"], curves_, built["metrics"], samples_, built["layer"],
            built["head"])


def tick(job: TrainingJob, seen: Seen | None, layer: float, head: float, following: Following, picked: str | None,
         model_key: tuple | None, on_screen: str = TAB_ID, session: str | None = None):
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
    # The value only when the picked model is gone (see picker_update): set always, it would undo a pick
    # made while this tick was queued.
    gone = {} if picked in (name for _, name in choices) else {"value": None}
    picker = gr.Dropdown(choices=list(choices), **gone) if choices != seen.choices else gr.skip()
    shared = (*shared_outputs(job, view, plotting), *buttons(view, session))
    latest = attention(view, None, layer, head) if following.on and plotting else None
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


def scrub(job: TrainingJob, following: Following, step: float, layer: float, head: float):
    """The user moved the timeline: show that snapshot and stop following the training."""
    following.on = False
    return attention(job.view(), step, layer, head), False


def redraw(job: TrainingJob, following: Following, step: float, layer: float, head: float,
           follow: bool) -> go.Figure:
    following.on = follow
    return attention(job.view(), None if follow else step, layer, head)


# ----- layout ------------------------------------------------------------------------------
def build(shell: Shell, job: TrainingJob, tab: gr.Tab, on_screen: gr.State) -> None:
    """on_screen: the id of the tab this page shows (the plots are drawn on this one only)."""
    d = DEFAULTS
    layers, d_model, heads, d_ff, dropout = preset_values(d.preset)
    with gr.Row():  # as for an idle job; the page's first tick shows them as the job's state allows
        start_button = gr.Button("Start", variant="primary")
        pause_button = gr.Button("Pause", interactive=False)
        resume_button = gr.Button("Resume", interactive=False)
        stop_button = gr.Button("Stop", variant="stop", interactive=False)
        # One line high, as the buttons beside it: the curves start higher on a 720-line projector.
        save_name = gr.Textbox(label="Checkpoint name", show_label=False, container=False, max_lines=1, scale=2,
                               placeholder="Checkpoint name (saved as NAME-stepN)")  # blank: the model's
        save_button = gr.Button("Save checkpoint", interactive=False, min_width=210)  # on one line
    button_row = [start_button, pause_button, resume_button, stop_button, save_button]
    if job.public:
        gr.Markdown(f"*A public studio: one training run at a time for every visitor. Only the page that "
                    f"starts a run can pause, resume, stop or save it, while it stays open (closed or reloaded, "
                    f"it leaves the run to everyone); a run ends {PUBLIC_MAX_MINUTES:.0f} minutes after it starts, "
                    f"and models have at most {PUBLIC_MAX_PARAMETERS / 1e6:.0f}M parameters.*")
    outcome = gr.Markdown(elem_classes="announce")  # a refused start, a saved checkpoint: read out
    download = gr.DownloadButton(visible=False)
    # Below the buttons, which stay on screen; it folds away once a run starts, so the curves
    # come up where the set-up was.
    with gr.Accordion("Set-up", open=True) as setup:
        with gr.Row():
            with gr.Column(scale=3):
                kind = gr.Radio(list(SOURCES), value=SOURCES[0], label="Data")
                task_name = d.data.split(":")[1]
                task = gr.Dropdown([(f"{n}: {TASK_LABELS.get(n, t.description)}", n) for n, t in TASKS.items()],
                                   value=task_name, label="Synthetic task (generated here, no download)",
                                   info=TASKS[task_name].description)
                path = gr.Textbox(label="Corpus folder or .tsv[.gz] file under data/ or ../shared/data "
                                        "(a TSV's column languages may follow, e.g. deu-eng.tsv.gz:en-de)",
                                  placeholder="e.g. ../shared/data/multi30k", visible=False)
                upload = gr.File(label="TSV file: source<TAB>target, one pair a line", file_types=[".tsv", ".txt", ".gz"],
                                 type="filepath", visible=False)
                hf_name = gr.Textbox(label=HF_LABEL_OFFLINE if hub_offline() else HF_LABEL_ONLINE,
                                     placeholder="bentrevett/multi30k", visible=False)
                with gr.Row():
                    src_lang = gr.Textbox(label="Source language (blank: from the data)", max_lines=1)
                    tgt_lang = gr.Textbox(label="Target language (blank: from the data)", max_lines=1)
                    limit = gr.Number(0, precision=0, label="Training pairs used (0: all)")
                name = gr.Textbox(d.name, label="Model name in the picker (live-…: follows the data)", max_lines=1)
            with gr.Column(scale=2):
                preset = gr.Dropdown(list(PRESETS), value=d.preset, label="Preset")
                with gr.Row():
                    layers_in = gr.Number(layers, precision=0, label="layers (encoder = decoder)")
                    d_model_in = gr.Number(d_model, precision=0, label="d_model")
                    heads_in = gr.Number(heads, precision=0, label="heads")
                with gr.Row():
                    d_ff_in = gr.Number(d_ff, precision=0, label="d_ff")
                    dropout_in = gr.Number(dropout, label="dropout", step=0.05)
                    vocab = gr.Number(d.vocab_size, precision=0, label="vocabulary (real corpora)")
        with gr.Row():
            steps = gr.Number(d.max_steps, precision=0, label="steps")
            warmup = gr.Number(d.warmup, precision=0, label="warm-up steps")
            lr_factor = gr.Number(d.lr_factor, label="lr factor", step=0.05)
            smoothing = gr.Number(d.label_smoothing, label="label smoothing ε", step=0.05)
            max_tokens = gr.Number(d.max_tokens, precision=0, label="max tokens per batch")
            clip = gr.Number(d.clip_norm, label="gradient clipping (0: off)")
            eval_every = gr.Number(d.eval_every, precision=0, label="evaluate every N steps")
            attention_every = gr.Number(d.attention_every, precision=0, label="attention snapshot every K steps")
        lr_line = gr.Markdown(peak_lr(d_model, d.warmup, d.lr_factor))
        gr.Markdown(f"**Device:** {md(device_line('auto'))}")
    state_line = gr.Markdown(elem_classes="status-line", elem_id="train-status")
    spoken = gr.Markdown(elem_classes=["announce", "visually-hidden"])  # the run's state, read out as it changes
    bar = gr.HTML(elem_id="train-progress")
    curve_plot = gr.Plot(label="Training curves", elem_id="train-curves")
    metrics_line = gr.Markdown()
    sample_table = gr.Markdown(NO_SAMPLES, elem_id="train-samples")
    gr.Markdown("### Attention timeline: one fixed test sentence, snapshotted while the model learns\n"
                "Its rows are the reference translation, fed to the decoder as in training (teacher forcing): "
                "they read right from the first step; what changes is where each one looks.")
    with gr.Row():
        timeline = Slider(0, d.attention_every, value=0, step=d.attention_every, label="training step", scale=3)
        # Wide enough for their labels on one line beside the number box, presenter mode's type included.
        layer = Slider(1, layers, value=layers, step=1, label="decoder layer", min_width=260)
        head = Slider(0, heads, value=0, step=1, label="head (0: mean)", min_width=310)
        follow = gr.Checkbox(True, label="follow the training (latest snapshot)")
    attention_plot = gr.Plot(label="Cross-attention of the fixed example")
    seen = gr.State(Seen())
    following = gr.State(Following())
    timer = gr.Timer(TICK_S)

    fields = [kind, task, path, upload, hf_name, src_lang, tgt_lang, limit, name, preset, layers_in, d_model_in,
              heads_in, d_ff_in, dropout_in, vocab, steps, warmup, lr_factor, smoothing, max_tokens, clip,
              eval_every, attention_every]
    kind.change(source_visibility, inputs=kind, outputs=[task, path, upload, hf_name])
    task.change(task_described, inputs=task, outputs=task)
    # The user's picks (.input, not .change): a page opened during a run is given that run's name and
    # model sizes (setup_of_the_run), which the data's default name and the preset's sizes must not replace.
    # always_last: keystrokes typed while the last one's update is on its way are not dropped.
    gr.on([kind.input, task.input, path.input, upload.upload, upload.clear, hf_name.input], data_picked,
          inputs=[kind, task, path, upload, hf_name, name], outputs=name, show_progress="hidden",
          trigger_mode="always_last")
    preset.input(guard(preset_values), inputs=preset, outputs=[layers_in, d_model_in, heads_in, d_ff_in, dropout_in])
    gr.on([d_model_in.change, warmup.change, lr_factor.change], peak_lr, inputs=[d_model_in, warmup, lr_factor],
          outputs=lr_line)
    # Gradio passes the browser session (gr.Request) to these: on a public studio only the
    # session that started a run controls it.
    def start_run(request: gr.Request, *values):
        return start(job, *values, session=session_of(request))

    def save_run(request: gr.Request, name: str, picked: str | None):
        return save(job, name, picked, session_of(request))

    start_button.click(guard(start_run), inputs=fields, outputs=[shell.model, outcome, download],
                       api_name="train_start").then(
        fold_setup, inputs=outcome, outputs=setup, show_progress="hidden").then(
        data_picked, inputs=[kind, task, path, upload, hf_name, name], outputs=name, show_progress="hidden")

    def release_page(request: gr.Request) -> None:  # its session, from Gradio
        job.release(session_of(request))

    # A public run's starter closing or reloading its page leaves the run to every visitor.
    shell.demo.unload(release_page)
    for button, action in ((pause_button, "pause"), (resume_button, "resume"), (stop_button, "stop")):
        # Their status line comes back with the click (the timer's tick took up to a second more); a
        # trivial call, so no concurrency limit: it never queues behind other sessions' redraws.
        button.click(guard(controller(job, action)), outputs=[state_line, *button_row], api_name=f"train_{action}",
                     concurrency_limit=None, show_progress="hidden")
    save_button.click(guard(save_run), inputs=[save_name, shell.model], outputs=[outcome, shell.model, download])
    shell.model.change(guard(partial(picked, job)), inputs=shell.model)
    shell.demo.load(warm_up)
    shell.demo.load(guard(partial(setup_of_the_run, job)), outputs=[*fields, setup], show_progress="hidden")
    live = [seen, state_line, bar, curve_plot, metrics_line, sample_table, layer, head, *button_row, timeline,
            attention_plot, spoken, shell.model, shell.model_key]

    def tick_page(request: gr.Request, *values):
        return tick(job, *values, session=session_of(request))

    tick_inputs = [seen, layer, head, following, shell.model, shell.model_key, on_screen]
    gr.on([timer.tick, shell.demo.load], guard(tick_page), inputs=tick_inputs, outputs=live, show_progress="hidden",
          api_name="train_view")
    # Drawn at once when the tab is shown, not at the next tick.
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden").then(
        guard(tick_page), inputs=tick_inputs, outputs=live, show_progress="hidden")
    timeline.input(guard(partial(scrub, job)), inputs=[following, timeline, layer, head],
                   outputs=[attention_plot, follow], trigger_mode="always_last")
    gr.on([layer.input, head.input, follow.input], guard(partial(redraw, job)), trigger_mode="always_last",
          inputs=[following, timeline, layer, head, follow], outputs=attention_plot)
