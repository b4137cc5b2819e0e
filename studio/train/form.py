"""The Train tab's set-up panel: its boxes (data, model, training), reading them into Settings
(settings_from, each bad box named), filling them from a run's Settings (form_values), and the
model name that follows the data until the user types one."""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import gradio as gr

from core.data.files import TSV_COLUMNS
from core.data.huggingface import cached_datasets, hub_offline
from core.data.tasks import TASKS
from core.model.config import PRESETS
from core.training.recipes import list_recipes
from core.training.schedule import noam_lr

from ..server.guard import guard
from ..server.limits import MAX_NAME_CHARS, clean_input
from ..text import md
from .job import TrainingJob
from .saving import safe_name
from .setup import Settings, device_line
from .sources import ROOT, SOURCES, UPLOAD_COPY_PREFIX, corpus_spec, discard_upload_copy

DEFAULTS = Settings()
# The set-up panel's inputs, in the order the callbacks receive them.
FIELDS = ("kind", "task", "path", "upload", "hf_name", "src_lang", "tgt_lang", "limit", "name", "preset",
          "layers", "d_model", "n_heads", "d_ff", "dropout", "vocab_size", "positional", "separate_vocab",
          "max_steps", "warmup", "lr_factor", "schedule", "peak_lr", "label_smoothing", "max_tokens", "clip_norm",
          "eval_every", "attention_every", "keep_best", "patience")
# Table 3's variations (section 3.5's learned positions, row E), the schedules and keeping the best.
POSITIONAL_CHOICES = [("sinusoidal (section 3.5)", "sinusoidal"), ("learned (Table 3, row E)", "learned")]
SCHEDULE_CHOICES = [("eq. 3 (lr factor)", "noam"), ("inverse √step (peak lr)", "inverse_sqrt"),
                    ("constant (peak lr)", "constant")]
KEEP_BEST_CHOICES = [("off", "off"), ("validation BLEU", "bleu"), ("validation loss", "loss"),
                     ("exact match (synthetic tasks)", "exact_match")]
# What decides the model's default name (data_picked's inputs).
NAMING = ("kind", "task", "path", "upload", "hf_name", "name")
# The studio sets HF_HUB_OFFLINE=1 unless told otherwise: then only cached datasets load.
HF_LABEL_OFFLINE = ("Hugging Face dataset: only one already in this machine's Hugging Face cache (the studio runs "
                    "offline, HF_HUB_OFFLINE=1)")
HF_LABEL_ONLINE = "Hugging Face dataset (downloaded from huggingface.co, or a cached copy)"
# The synthetic tasks' labels in the picker, short enough for its box (presenter mode included); core's
# full description of the picked task shows below it.
TASK_LABELS = {"copy": "copy 3-10 letters", "reverse": "reverse 3-10 letters", "sort": "sort 3-10 letters",
               "numbers": "English numbers → German words", "dates": "dates in six formats → ISO 8601"}


# ----- reading the panel ------------------------------------------------------------------------
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
        positional=v["positional"], separate_vocab=bool(v["separate_vocab"]), schedule=v["schedule"],
        peak_lr=_float(v["peak_lr"], "peak lr", 1.0, above_zero=True),
        keep_best=None if v["keep_best"] in (None, "off") else v["keep_best"],
        patience=_int(v["patience"] or 0, "patience", 0) or None,  # 0: never stop early
        max_tokens=_int(v["max_tokens"], "max tokens", 16),
        clip_norm=_float(v["clip_norm"], "gradient clipping"), eval_every=_int(v["eval_every"], "evaluate every"),
        attention_every=_int(v["attention_every"], "attention snapshot every"))
    data = corpus_spec(v["kind"], v["task"], v["path"], v["upload"], v["hf_name"])  # last: it may copy an upload
    try:
        return Settings(data=data, **fields)
    except BaseException:
        discard_upload_copy(data)
        raise


# ----- filling the panel ------------------------------------------------------------------------
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
              "limit": s["limit"] or 0, "keep_best": s["keep_best"] or "off", "patience": s["patience"] or 0}
    return (*data_fields(settings.data), *(values[f] for f in FIELDS[5:]))


def setup_of_the_run(job: TrainingJob) -> tuple:
    """On a page's load: the set-up panel shows the job's run, folded as after Start; none: left as built."""
    settings = job.view().settings
    if settings is None:
        return (gr.skip(),) * (len(FIELDS) + 1)
    return (*form_values(settings), gr.Accordion(open=False))


def peak_lr(d_model: float | None, warmup: float | None, factor: float | None) -> str:
    """Eq. 3's peak, reached at step = warmup."""
    try:
        factor, d_model, warmup = float(factor), float(d_model), float(warmup)
    except (TypeError, ValueError):  # a box being typed into
        return ""
    if not (factor > 0 and d_model > 0 and warmup > 0):  # Start refuses these, and says why
        return "Peak learning rate (eq. 3): the lr factor, d_model and warm-up must all be above 0."
    lr = noam_lr(warmup, d_model, warmup, factor)
    return f"Peak learning rate (eq. 3, at step {int(warmup)}): factor · d_model^−0.5 · warmup^−0.5 = **{lr:.2e}**"


RECIPE_NONE = "none: the boxes as they are"


def studio_recipes() -> list[dict]:
    """The recipes the set-up panel can hold: a two-way model's (tatoeba-en-es: hours on a CPU) is train_cli.py's."""
    return [r for r in list_recipes() if not r["settings"].get("both_directions")]


def recipe_choices() -> list[tuple[str, str]]:
    return [(RECIPE_NONE, "")] + [(f"{r['name']}: {r['description']}", r["name"]) for r in studio_recipes()]


def recipe_values(name: str) -> tuple:
    """The set-up panel (FIELDS' order) filled with a recipe's settings (core.training.recipes): the data, the model and
    the schedule it was tuned with; the boxes it does not set keep the tab's defaults. None picked: left as is."""
    recipe = next((r["settings"] for r in studio_recipes() if r["name"] == name), None)
    if recipe is None:
        return (gr.skip(),) * len(FIELDS)
    chosen = {k: v for k, v in recipe.items() if k in Settings.__dataclass_fields__}
    values = dict(zip(FIELDS, form_values(replace(DEFAULTS, **chosen))))
    values["name"] = default_name(*(values[f] for f in NAMING[:-1]))  # the model named after its data
    return tuple(values[f] for f in FIELDS)


def cached_line() -> str:
    """The Hugging Face datasets this machine's cache holds (core.data.huggingface), as the name box's hint."""
    found = [f"{d.name}:{d.config}" if d.config else d.name for d in cached_datasets()]
    if not found:
        return "No dataset in this machine's Hugging Face cache."
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    return "In this machine's cache: " + ", ".join(found[:8]) + more


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
                name: str | None) -> str | dict:
    """The name box follows the data while it holds a default name (blank or live-...); a name the
    user typed stays (gr.skip())."""
    current = (name or "").strip()
    if current and not current.startswith("live-"):
        return gr.skip()
    return default_name(kind, task, path, upload, hf_name)


def source_visibility(kind: str) -> tuple:
    """The data source's own box shown, the other sources' hidden."""
    return tuple(gr.update(visible=kind == k) for k in SOURCES)


# ----- layout -------------------------------------------------------------------------------------
@dataclass
class SetupPanel:
    """The panel's boxes by their FIELDS name, in FIELDS' order, and the accordion that holds them."""

    fields: dict[str, gr.components.Component]
    accordion: gr.Accordion

    def inputs(self, names: tuple[str, ...] = FIELDS) -> list[gr.components.Component]:
        return [self.fields[name] for name in names]


def build_setup() -> SetupPanel:
    """The panel, open; it folds away once a run starts, so the curves come up where it was."""
    with gr.Accordion("Set-up", open=True) as accordion:
        recipe = gr.Dropdown(recipe_choices(), value="", label="Recipe (fills the boxes below)",
                             info="Tuned for a GPU: on a CPU the same run takes far longer")
        with gr.Row():
            with gr.Column(scale=3):
                data = _data_boxes()
            with gr.Column(scale=2):
                model = _model_boxes()
        training = _training_boxes()
        lr_line = gr.Markdown(peak_lr(preset_values(DEFAULTS.preset)[1], DEFAULTS.warmup, DEFAULTS.lr_factor))
        gr.Markdown(f"**Device:** {md(device_line('auto'))}")
    boxes = {**data, **model, **training}
    panel = SetupPanel({name: boxes[name] for name in FIELDS}, accordion)
    recipe.input(guard(recipe_values), inputs=recipe, outputs=panel.inputs())
    _keep_consistent(panel, lr_line)
    return panel


def _data_boxes() -> dict[str, gr.components.Component]:
    """Where the data comes from (one source's box shown at a time), its languages, and the model's name."""
    task_name = DEFAULTS.data.split(":")[1]
    boxes = dict(
        kind=gr.Radio(list(SOURCES), value=SOURCES[0], label="Data"),
        task=gr.Dropdown([(f"{n}: {TASK_LABELS.get(n, t.description)}", n) for n, t in TASKS.items()],
                         value=task_name, label="Synthetic task (generated here, no download)",
                         info=TASKS[task_name].description),
        path=gr.Textbox(label="Corpus folder or .tsv[.gz] file under data/ or ../shared/data "
                              "(a TSV's column languages may follow, e.g. deu-eng.tsv.gz:en-de)",
                        placeholder="e.g. ../shared/data/multi30k", visible=False),
        upload=gr.File(label="TSV file: source<TAB>target, one pair a line", file_types=[".tsv", ".txt", ".gz"],
                       type="filepath", visible=False),
        hf_name=gr.Textbox(label=HF_LABEL_OFFLINE if hub_offline() else HF_LABEL_ONLINE,
                           placeholder="bentrevett/multi30k", info=cached_line(), visible=False))
    with gr.Row():
        boxes.update(src_lang=gr.Textbox(label="Source language (blank: from the data)", max_lines=1),
                     tgt_lang=gr.Textbox(label="Target language (blank: from the data)", max_lines=1),
                     limit=gr.Number(0, precision=0, label="Training pairs used (0: all)"))
    boxes["name"] = gr.Textbox(DEFAULTS.name, label="Model name in the picker (live-…: follows the data)",
                               max_lines=1)
    return boxes


def _model_boxes() -> dict[str, gr.components.Component]:
    """The preset and the sizes that override it (filled with the preset's)."""
    layers, d_model, heads, d_ff, dropout = preset_values(DEFAULTS.preset)
    boxes = dict(preset=gr.Dropdown(list(PRESETS), value=DEFAULTS.preset, label="Preset"))
    with gr.Row():
        boxes.update(layers=gr.Number(layers, precision=0, label="layers (encoder = decoder)"),
                     d_model=gr.Number(d_model, precision=0, label="d_model"),
                     n_heads=gr.Number(heads, precision=0, label="heads"))
    with gr.Row():
        boxes.update(d_ff=gr.Number(d_ff, precision=0, label="d_ff"),
                     dropout=gr.Number(dropout, label="dropout", step=0.05),
                     vocab_size=gr.Number(DEFAULTS.vocab_size, precision=0, label="vocabulary (real corpora)"))
    with gr.Row():
        boxes.update(positional=gr.Dropdown(POSITIONAL_CHOICES, value=DEFAULTS.positional, label="positions"),
                     separate_vocab=gr.Checkbox(DEFAULTS.separate_vocab, label="a vocabulary per language",
                                                info="Section 3.4 shares one; separate ones tie only the decoder's"))
    return boxes


def _training_boxes() -> dict[str, gr.components.Component]:
    """The schedule, the batches and how often the run is evaluated and snapshotted, in one row."""
    d = DEFAULTS
    with gr.Row():
        boxes = dict(
            max_steps=gr.Number(d.max_steps, precision=0, label="steps"),
            warmup=gr.Number(d.warmup, precision=0, label="warm-up steps"),
            lr_factor=gr.Number(d.lr_factor, label="lr factor", step=0.05),
            label_smoothing=gr.Number(d.label_smoothing, label="label smoothing ε", step=0.05),
            max_tokens=gr.Number(d.max_tokens, precision=0, label="max tokens per batch"),
            clip_norm=gr.Number(d.clip_norm, label="gradient clipping (0: off)"),
            eval_every=gr.Number(d.eval_every, precision=0, label="evaluate every N steps"))
    with gr.Row():
        boxes.update(
            attention_every=gr.Number(d.attention_every, precision=0, label="attention snapshot every K steps"),
            schedule=gr.Dropdown(SCHEDULE_CHOICES, value=d.schedule, label="learning rate schedule",
                                 info="warm-up first, then as named"),
            peak_lr=gr.Number(d.peak_lr, label="peak lr (inverse sqrt, constant)", step=1e-4),
            keep_best=gr.Dropdown(KEEP_BEST_CHOICES, value="off", label="keep best by",
                                  info="Save can then write the best evaluation's weights, not only the latest"),
            patience=gr.Number(0, precision=0, label="patience (evaluations; 0: never stop early)"))
    return boxes


def _keep_consistent(panel: SetupPanel, lr_line: gr.Markdown) -> None:
    """The boxes that follow others: the data source's box, the task's description, the default name,
    the preset's sizes, the peak learning rate."""
    f = panel.fields
    f["kind"].change(source_visibility, inputs=f["kind"], outputs=panel.inputs(("task", "path", "upload", "hf_name")))
    f["task"].change(task_described, inputs=f["task"], outputs=f["task"])
    # The user's picks (.input, not .change): a page opened during a run is given that run's name and
    # model sizes (setup_of_the_run), which the data's default name and the preset's sizes must not replace.
    # always_last: keystrokes typed while the last one's update is on its way are not dropped.
    gr.on([f["kind"].input, f["task"].input, f["path"].input, f["upload"].upload, f["upload"].clear,
           f["hf_name"].input], data_picked, inputs=panel.inputs(NAMING), outputs=f["name"], show_progress="hidden",
          trigger_mode="always_last")
    f["preset"].input(guard(preset_values), inputs=f["preset"],
                      outputs=panel.inputs(("layers", "d_model", "n_heads", "d_ff", "dropout")))
    gr.on([f["d_model"].change, f["warmup"].change, f["lr_factor"].change], peak_lr,
          inputs=panel.inputs(("d_model", "warmup", "lr_factor")), outputs=lr_line)
