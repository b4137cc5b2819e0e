"""What the tabs share (studio/shell.py): the status line, the picked model's examples, and the registry key
on which whatever shows the picked model redraws."""
from __future__ import annotations

import gradio as gr

from studio import app, shell
from studio.server.registry import ModelRegistry
from tests.helpers.studio import studio_bundle, studio_registry


def test_status_line_names_model_parameters_vocab_device(registry):
    line = shell.status_line(registry, "studio-tiny")
    bundle = studio_bundle()
    assert "studio\\-tiny" in line and f"{bundle.model.num_parameters():,}" in line and "cpu" in line
    assert "No model yet" in shell.status_line(ModelRegistry(None), None)
    assert "cannot be used" in shell.status_line(registry, "missing")


def test_the_status_line_says_what_the_shipped_caption_model_learnt_from():
    line = shell.status_line(ModelRegistry(), "multi30k-de-en-small")
    assert r"trained on Multi30k image captions \(the benchmark\)" in line  # Markdown-escaped


def test_the_tabs_redraw_on_the_picked_models_registry_key_not_its_name():
    """A new training run under the picked name changes shell.model_key but not the picker's value
    (whose .change would not fire): whatever shows the picked model listens to the key."""
    def name(fn) -> str:  # guard(partial(f, ...)) -> "f"
        inner = getattr(fn.fn, "__wrapped__", fn.fn)
        return getattr(inner, "func", inner).__name__

    demo = app.build_app(studio_registry())
    picker = next(b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and b.label == "Model")
    fns = list(demo.fns.values())
    on_picker = {name(fn): fn for fn in fns if (picker._id, "change") in fn.targets}
    assert set(on_picker) == {"key", "picked"}  # the key itself; the Train tab fetching newer weights
    key = on_picker["key"].outputs[0]
    on_key = {name(fn) for fn in fns if (key._id, "change") in fn.targets}
    assert on_key == {"status_line", "defaults", "head_choices", "picked_model_ranges", "example_choices",
                      "examples_update", "model_changed", "settings_changed", "model_width", "learned_view", "refresh",
                      "model_choices", "<lambda>", "where_update", "corpus_default", "forget_drawn"}
    # <lambda>: the Attention tab's redraw; refresh: Attention arithmetic's and Saliency's; model_choices: Compare's
    # model A; learned_view: the Positional encoding tab's learned positions; where_update: Knock out's places of
    # a part (the model's layers); corpus_default: Knock out's corpus; forget_drawn: Word choice's redraw (unless a
    # link is about to draw it)
    train_view = next(fn for fn in fns if fn.api_name == "train_view")
    assert train_view.outputs[-1] is key and train_view.inputs[-2] is key  # a run under the picked name
