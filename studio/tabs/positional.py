"""Section 3.5: the sinusoidal positional encoding, as a table, as curves and as similarities; and a
model's learned positions (Table 3, row E) beside them when it has them."""
from __future__ import annotations

from functools import partial

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import torch

from core.model.positional import encoding_at, sinusoidal_encoding

from .. import plots
from ..components import Slider
from ..server.guard import guard
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Shell

D_MODEL_RANGE = (8, 512)
HEATMAP_CAPTION = (
    "**Section 3.5.** Each row is the vector added to the embedding of the token at that position: "
    "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)). "
    "Left columns change quickly along the positions, right columns slowly — a binary counter made of waves. "
    "d_model starts at the picked model's own.")
CURVES_CAPTION = (
    "**Section 3.5:** \"each dimension of the positional encoding corresponds to a sinusoid. The wavelengths "
    "form a geometric progression from 2π to 10000 · 2π.\" Dimensions 2i and 2i+1 share a frequency: a sine "
    "and a cosine.")
SIMILARITY_CAPTION = (
    "**Section 3.5:** the authors chose sinusoids because \"for any fixed offset k, PE(pos+k) can be "
    "represented as a linear function of PE(pos)\". The dot product of two encodings depends only on their "
    "distance, so the bands run parallel to the diagonal: nearby positions look alike, far ones less so.")

LEARNED_CAPTION = (
    "**Table 3, row E:** this model learned its positions — one trained vector per position, added to the "
    "embeddings in place of the sinusoids above (\"nearly identical results\", section 3.5). A learned table has "
    "no row past the longest sentence it was built for (max_len); the sinusoids extend to any length.")


def learned_view(registry: ModelRegistry, name: str | None, length: float) -> tuple:
    """(the learned section shown or hidden, its table, its similarity) for the picked model."""
    try:
        model = registry.get(name).model
    except UNAVAILABLE:
        return gr.update(visible=False), gr.skip(), gr.skip()
    if model.config.positional != "learned":
        return gr.update(visible=False), gr.skip(), gr.skip()
    table = model.positions.table.detach()[: max(1, int(length))].float().numpy()
    return gr.update(visible=True), plots.learned_heatmap(table, name), plots.learned_similarity(table)


def even_width(d_model: float) -> int:
    """The slider's d_model as the encoding takes it: an even number of dimensions, at least 2."""
    return max(2, int(d_model) // 2 * 2)


def default_dims(d_model: float) -> list[int]:
    """A sine-cosine pair and two slower sines at d_model/8 and d_model/4: their wavelengths,
    2π·10000^(1/8) ≈ 20 and 2π·10 ≈ 63 positions, are the same whatever d_model is."""
    d = even_width(d_model)
    return sorted({0, 1, d // 8 // 2 * 2, d // 4 // 2 * 2})


DEFAULT_DIMS = default_dims(128)


def dimension_choices(d_model: float, chosen: list[int] | None, picked: bool) -> gr.Dropdown:
    """The dimensions offered for d_model: the defaults for it, or the ones the user picked
    (picked=True) that still exist."""
    d = even_width(d_model)
    keep = [int(x) for x in (chosen or []) if 0 <= int(x) < d] if picked else default_dims(d)
    return gr.Dropdown(choices=list(range(d)), value=keep or [0, 1], multiselect=True)


def render(d_model: float, length: float, dims: list[int] | None) -> tuple[go.Figure, go.Figure, go.Figure]:
    """(heatmap, curves, similarity) for a d_model (rounded down to even, which the heatmap's title
    says) and a number of positions."""
    width = even_width(d_model)
    length = max(1, int(length))
    table = sinusoidal_encoding(length, width).numpy()
    dims = [int(d) for d in (dims or []) if 0 <= int(d) < width] or [0, 1]
    note = "" if width == d_model else f" (d_model {d_model:g} rounded down to even: sin and cos come in pairs)"
    between = np.linspace(0, length - 1, 8 * (length - 1) + 1)  # 8 points a position: smooth at 2π
    smooth = encoding_at(torch.from_numpy(between), width).numpy()
    return plots.pe_heatmap(table, note), plots.pe_curves(table, dims, (between, smooth)), plots.pe_similarity(table)


def model_width(registry: ModelRegistry, name: str | None, dims: list[int] | None, picked: bool) -> tuple:
    """The picked model's own d_model (within the slider's range) and the dimensions for it: the tab opens
    on the encoding that model adds to its embeddings. No model to read: left as it is."""
    try:
        width = registry.get(name).model.config.d_model
    except UNAVAILABLE:
        return gr.skip(), gr.skip()
    width = min(max(width, D_MODEL_RANGE[0]), D_MODEL_RANGE[1])
    return width, dimension_choices(width, dims, picked)


def build(shell: Shell) -> None:
    with gr.Row():
        d_model = Slider(*D_MODEL_RANGE, value=128, step=2, label="d_model")
        length = Slider(2, 200, value=60, step=1, label="positions")
        dims = gr.Dropdown(choices=list(range(128)), value=DEFAULT_DIMS, multiselect=True,
                           label="dimensions to draw as curves")
    # Empty until the page loads, which draws them for the picked model's d_model: drawn here, the three
    # figures were 140 KB of the page's configuration, which every visitor fetches before anything else.
    heatmap = gr.Plot(label="Positional encoding")
    gr.Markdown(HEATMAP_CAPTION)
    curves = gr.Plot(label="Chosen dimensions")
    gr.Markdown(CURVES_CAPTION)
    similarity = gr.Plot(label="Position-to-position similarity")
    gr.Markdown(SIMILARITY_CAPTION)
    with gr.Column(visible=False) as learned:
        gr.Markdown(LEARNED_CAPTION)
        learned_table = gr.Plot(label="The picked model's learned positions")
        learned_sim = gr.Plot(label="Similarity of the learned positions")
    # .input, not .release: a slider's number box typed into (Enter, no drag) fires no release.
    # While dragging, always_last drops the values passed over before the last one is drawn.
    picked = gr.State(False)  # the user chose dimensions: keep them when d_model changes
    dims.input(lambda: True, outputs=picked, show_progress="hidden")
    draw = dict(fn=guard(render), inputs=[d_model, length, dims], outputs=[heatmap, curves, similarity])
    # A new d_model draws after the dimensions are offered for it: drawn at once, the old dimensions
    # (e.g. 16 for a d_model of 12) were refused by Gradio ("Value: 16 is not in the list of choices").
    d_model.input(guard(dimension_choices), inputs=[d_model, dims, picked], outputs=dims,
                  trigger_mode="always_last").then(**draw)
    gr.on([length.input, dims.input], **draw, trigger_mode="always_last")
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(model_width, shell.registry)),
          inputs=[shell.model, dims, picked], outputs=[d_model, dims], show_progress="hidden").then(**draw)
    gr.on([shell.demo.load, shell.model_key.change, length.input], guard(partial(learned_view, shell.registry)),
          inputs=[shell.model, length], outputs=[learned, learned_table, learned_sim], show_progress="hidden",
          trigger_mode="always_last")
