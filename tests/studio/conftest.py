"""What the studio's tests share: a registry holding the tests' tiny model (a module needing another defines its
own), and the toasts the callbacks raise."""
from __future__ import annotations

import pytest

from tests.helpers.studio import studio_registry


@pytest.fixture
def registry():
    return studio_registry()


@pytest.fixture
def toasts(monkeypatch) -> list[str]:
    """Every gr.Info / gr.Warning message the callbacks raise (Gradio renders them as HTML)."""
    import gradio as gr

    seen: list[str] = []
    monkeypatch.setattr(gr, "Info", lambda message, *a, **k: seen.append(message))
    monkeypatch.setattr(gr, "Warning", lambda message, *a, **k: seen.append(message))
    return seen
