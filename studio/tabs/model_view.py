"""The model's parts: parameter counts, the paper's learning-rate schedule (5.3), the
label-smoothed target (5.4) and the masks of an example batch (3.2.3)."""
from __future__ import annotations

import math
from functools import partial

import gradio as gr
import plotly.graph_objects as go

from .. import plots
from ..components import Slider
from ..numbers.model_parts import (
    PAPER_SCHEDULE,
    example_sentences,
    example_translation,
    lr_figure,
    mask_figure,
    parameter_groups,
    schedule_line,
    smoothing_figure,
    summary,
    training_config,
)
from ..server.guard import guard
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Shell
from ..text import md

LR_CAPTION = ("**Section 5.3, eq. 3:** the learning rate rises linearly for the first warmup_steps, then "
              "falls with the inverse square root of the step. Its peak, lr factor · d_model^-0.5 · warmup^-0.5 "
              "(the paper's factor: 1), is smaller for wider models. fairseq's inverse square root, which some "
              "models here train with, has the same shape but names its peak learning rate outright.")
WARMUPS, SHOWN_STEPS, EPSILONS = (1, 16000), (100, 100000), (0.0, 0.5)  # the sliders' ranges
SMOOTHING_CAPTION = ("**Section 5.4:** label smoothing (the paper: ε = 0.1; the slider sets ε) trains towards "
                     "1 − ε on the reference token and ε spread evenly over the whole vocabulary (shown on a "
                     "slice; note the log scale). "
                     "\"This hurts perplexity, as the model learns to be more unsure, but improves accuracy "
                     "and BLEU score.\"")
MASK_CAPTION = ("**Sections 3.1 and 3.2.3:** padding keys get zero attention weight, so sentences of different "
                "lengths share a batch; the decoder's self-attention is causal — position t sees keys ≤ t — so "
                "training on whole target sentences never lets a position look at the word it must predict.")


def render(registry: ModelRegistry, name: str | None, warmup: float, steps: float, eps: float) -> tuple:
    """(summary line, parameter plot, parameter table, lr plot, schedule line, smoothing plot, mask plot) for
    the picked model."""
    try:
        bundle = registry.get(name)
    except UNAVAILABLE as exc:
        blank = plots.empty("no model")
        return f"No model to show: {md(exc)}", blank, "", blank, "", blank, blank
    sentences = example_sentences(bundle)
    first = example_translation(bundle, sentences)
    line, table = summary(bundle)
    return (line, plots.parameter_shares(parameter_groups(bundle)), table, lr_figure(bundle, warmup, steps),
            schedule_line(bundle),
            smoothing_figure(bundle, eps, first.ids), mask_figure(bundle, sentences, first))


def lr_only(registry: ModelRegistry, name: str | None, warmup: float, steps: float) -> go.Figure:
    """The learning-rate plot alone, when its sliders move (render() decodes an example and draws six
    figures: ~10x the work, at every slider step)."""
    try:
        return lr_figure(registry.get(name), warmup, steps)
    except UNAVAILABLE:
        return plots.empty("no model")


def smoothing_only(registry: ModelRegistry, name: str | None, eps: float) -> go.Figure:
    """The label-smoothing plot alone, when ε moves."""
    try:
        bundle = registry.get(name)
    except UNAVAILABLE:
        return plots.empty("no model")
    return smoothing_figure(bundle, eps, example_translation(bundle, example_sentences(bundle)).ids)


def defaults(registry: ModelRegistry, name: str | None) -> tuple[int, int, float]:
    """(warm-up, steps shown, ε) of the picked model's training (the paper's without a record)."""
    try:
        c = training_config(registry.get(name)) or PAPER_SCHEDULE
    except UNAVAILABLE:
        c = PAPER_SCHEDULE
    steps = math.ceil(c.max_steps / 100) * 100  # the whole run, in the slider's steps of 100
    return _within(c.warmup, WARMUPS), _within(steps, SHOWN_STEPS), _within(c.label_smoothing, EPSILONS)


def _within(value, bounds: tuple):
    """value clamped to a slider's range (schedule_line still names a value beyond it)."""
    return min(max(value, bounds[0]), bounds[1])


def build(shell: Shell) -> None:
    summary_md = gr.Markdown()
    shares_plot = gr.Plot(label="Parameters by kind")
    # Folded: its 20-odd rows would push the interactive plots a screen and more down.
    with gr.Accordion("Parameters per component, layer by layer", open=False):
        table_md = gr.Markdown()
    with gr.Row():
        # Step 1 from 1: the Train tab's runs warm up for tens of steps, the paper's for 4000.
        warmup = Slider(*WARMUPS, value=4000, step=1, label="warmup_steps")
        steps = Slider(*SHOWN_STEPS, value=30000, step=100, label="steps shown")
        eps = Slider(*EPSILONS, value=0.1, step=0.01, label="label smoothing ε")
    lr_plot = gr.Plot(label="Learning-rate schedule")
    schedule_md = gr.Markdown()
    gr.Markdown(LR_CAPTION)
    smoothing_plot = gr.Plot(label="Label-smoothed target")
    gr.Markdown(SMOOTHING_CAPTION)
    mask_plot = gr.Plot(label="Masks")
    gr.Markdown(MASK_CAPTION)
    outputs = [summary_md, shares_plot, table_md, lr_plot, schedule_md, smoothing_plot, mask_plot]
    draw = guard(partial(render, shell.registry))
    # On load too: the picked model's own warm-up, length and smoothing, not the paper's (e.g. 800, not 4000).
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(defaults, shell.registry)), inputs=shell.model,
          outputs=[warmup, steps, eps]).then(draw, inputs=[shell.model, warmup, steps, eps], outputs=outputs)
    gr.on([warmup.input, steps.input], guard(partial(lr_only, shell.registry)), inputs=[shell.model, warmup, steps],
          outputs=lr_plot, trigger_mode="always_last")
    eps.input(guard(partial(smoothing_only, shell.registry)), inputs=[shell.model, eps], outputs=smoothing_plot,
              trigger_mode="always_last")
