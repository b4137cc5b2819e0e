"""The app (studio/app.py): its command line's defaults and refusals, the Lesson panel it presents, and every
tab built with a model or none."""
from __future__ import annotations

import gradio as gr
import pytest

from studio import app
from studio.server.registry import ModelRegistry
from tests.helpers.studio import studio_registry


def test_cli_defaults_are_local_and_private():
    args = app.parse_args([])
    assert (args.host, args.port, args.share, args.checkpoint) == ("127.0.0.1", 7860, False, None)


def test_the_shipped_lesson_is_presented_unless_no_lesson_is_asked_for():
    assert app.parse_args([]).lesson == app.LESSON and app.LESSON.is_file()
    assert app.parse_args(["--no-lesson"]).lesson is None
    def panels(lesson) -> list[str]:
        return [b.label for b in app.build_app(ModelRegistry(None), lesson=lesson).blocks.values()
                if isinstance(b, gr.Accordion) and (b.label or "").startswith("Lesson: ")]
    assert len(panels(app.read_lesson(app.LESSON))) == 1 and panels(None) == []


def test_cli_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(SystemExit, match="is not a checkpoint: missing"):
        app.main(["--checkpoint", str(tmp_path)])


def test_app_builds_with_every_tab_and_no_model():
    for registry in (studio_registry(), ModelRegistry(None)):
        demo = app.build_app(registry)
        labels = {b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)}
        assert {"Translate", "What if", "Beam search", "Attention", "Attention arithmetic", "Saliency",
                "Positional encoding", "Model", "Compare"} <= labels
