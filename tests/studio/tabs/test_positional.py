"""The Positional encoding tab (studio/tabs/positional.py): its plots follow d_model and length, say when
d_model was rounded and tick whole positions; the tab starts at the picked model's d_model and draws a new
one after its dimensions are offered."""
from __future__ import annotations

import gradio as gr
import numpy as np

from studio import app
from studio.components import Slider
from studio.tabs import positional
from tests.helpers.studio import studio_registry


def test_positional_plots_follow_d_model_and_length():
    heatmap, curves, similarity = positional.render(65, 30, [0, 1, 200])
    assert heatmap.data[0].z.shape == (30, 64)  # d_model rounded down to even
    named = [t for t in curves.data if t.showlegend is not False]
    assert [t.name for t in named] == ["dim 0 (sin)", "dim 1 (cos)"]
    # Each drawn as the sinusoid it is, between the whole positions (dim 0's 2π read as a zig-zag joined
    # from one to the next), with the whole positions' values, what the model adds, as dots on it.
    smooth, dots = curves.data[0], curves.data[1]
    assert len(smooth.x) == 8 * 29 + 1 and np.allclose(smooth.y, np.sin(smooth.x))
    assert list(dots.x) == list(range(30)) and np.allclose(dots.y, heatmap.data[0].z[:, 0], atol=1e-6)
    assert similarity.data[0].z.shape == (30, 30)
    assert positional.dimension_choices(16, [0, 20], picked=True).value == [0]  # the user's, where they exist
    assert positional.default_dims(128) == [0, 1, 16, 32]
    assert positional.dimension_choices(512, [0, 1, 16, 32], picked=False).value == [0, 1, 64, 128]  # same waves


def test_positional_plots_say_d_model_was_rounded_and_tick_whole_positions():
    heatmap, curves, similarity = positional.render(13, 2, [0, 1])
    assert heatmap.data[0].z.shape == (2, 12) and "d_model 13 rounded down to even" in heatmap.layout.title.text
    assert "rounded" not in positional.render(12, 2, [0])[0].layout.title.text
    assert [t.name for t in positional.render(12, 2, [12])[1].data if t.showlegend is not False] == [
        "dim 0 (sin)", "dim 1 (cos)"]  # 12: none
    # Two positions: plotly would tick 0, 0.5, 1; one tick per position instead (plenty: its own choice).
    for axis in (heatmap.layout.yaxis, curves.layout.xaxis, similarity.layout.xaxis, similarity.layout.yaxis):
        assert axis.dtick == 1 and axis.title.text == "position"
    assert positional.render(12, 60, [0])[1].layout.xaxis.dtick is None


def test_the_positional_tab_starts_at_the_picked_models_d_model(registry):
    width, dims = positional.model_width(registry, "studio-tiny", [0, 1], False)
    assert width == registry.get("studio-tiny").model.config.d_model and dims.value == positional.default_dims(width)
    assert positional.model_width(registry, "no-such-model", [0, 1], False) == (gr.skip(), gr.skip())


def test_a_new_d_model_is_drawn_after_its_dimensions_are_offered():
    demo = app.build_app(studio_registry())
    d_model = next(i for i, b in demo.blocks.items() if isinstance(b, Slider) and b.label == "d_model")
    fns = {i: (getattr(f.fn, "__name__", ""), f) for i, f in demo.fns.items()}
    # Drawn beside dimension_choices, render got the old dimensions, which Gradio refused against the new
    # choices ("Value: 16 is not in the list of choices" for a d_model of 12).
    assert not any(name == "render" and (d_model, "input") in f.targets for name, f in fns.values())
    offered = next(i for i, (name, f) in fns.items() if name == "dimension_choices")
    assert any(name == "render" and f.trigger_after == offered for name, f in fns.values())
