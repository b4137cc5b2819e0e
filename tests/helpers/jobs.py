"""Test helpers for the Train tab (studio/train/): a quick lecture run, waiting on the job's state (never on a
fixed sleep), the set-up panel's values, which buttons a reply enables, what an update sends to the page, and
whether two models translate alike. The `job` fixture is tests/studio/train/conftest.py's."""
from __future__ import annotations

import time

import gradio as gr

from core.inference.translation import translate_detailed
from studio.train import form, live, sources
from studio.train import job as training
from studio.train.job import Settings, TrainingJob

QUICK = Settings(max_steps=30, max_tokens=256, warmup=10, eval_every=10, attention_every=5)
ENDED = ("finished", "stopped", "failed")


def wait_for(job: TrainingJob, predicate, timeout: float = 300.0) -> training.JobView:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = job.view()
        if predicate(view):
            return view
        time.sleep(0.02)
    raise TimeoutError(f"job still {job.view().state} at step {job.view().step}")


def panel(**changes) -> list:
    """The set-up panel's values in FIELDS order: the tab's defaults, changed."""
    d = form.DEFAULTS
    layers, d_model, heads, d_ff, dropout = form.preset_values(d.preset)
    values = dict(kind=sources.SOURCES[0], task="numbers", path="", upload=None, hf_name="", src_lang="",
                  tgt_lang="", limit=0, name="live-numbers", preset=d.preset, layers=layers, d_model=d_model,
                  n_heads=heads, d_ff=d_ff, dropout=dropout, vocab_size=d.vocab_size, max_steps=30, warmup=10,
                  lr_factor=d.lr_factor, label_smoothing=d.label_smoothing, max_tokens=256, clip_norm=0,
                  eval_every=10, attention_every=5, positional="sinusoidal", separate_vocab=False, schedule="noam",
                  peak_lr=d.peak_lr, keep_best="off", patience=0)
    values.update(changes)
    return [values[f] for f in form.FIELDS]


def enabled(buttons) -> set[str]:
    """The names of the Train tab's buttons that are enabled."""
    return {name for name, button in zip(live.BUTTONS, buttons, strict=True) if button.interactive}


def sent(update: gr.Dropdown) -> dict:
    """What a component returned as an update sends to the page: the arguments given, not its defaults."""
    return update._constructor_args[0]


def same_output(a, b) -> bool:
    """Both models translate alike (translate_detailed: a barely trained model's outputs run to
    the length limit, which translate() would warn about)."""
    return [r.ids for r in translate_detailed(a, ["4 2"], method="greedy")] == [
        r.ids for r in translate_detailed(b, ["4 2"], method="greedy")]
