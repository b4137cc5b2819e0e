"""Gradio components with the studio's manners."""
from __future__ import annotations

import gradio as gr


class Slider(gr.Slider):
    """A slider whose typed-in number is clamped to its range. Gradio's own slider refuses a
    value typed outside it ("Value 6 is greater than maximum value 3.") and every output of the
    event shows "Error" instead of its plot; a lecturer typing the paper's 6 layers for a
    3-layer model should see layer 3."""

    def preprocess(self, payload: float | None) -> float:
        # A cleared number box: the minimum, which the box itself shows once it loses focus (Gradio's
        # preprocess would raise TypeError; the default drew one value while the box showed another).
        if payload is None:
            payload = self.minimum
        return super().preprocess(min(max(payload, self.minimum), self.maximum))


class TypedSlider(Slider):
    """A slider whose value reaches the callback as it came (a string or NaN through the API, 0 or 10⁹
    typed): the callback clamps it and says what it changed (limits.clamp_beam). Gradio's check failed
    with a bare "Error", and Slider's clamp said nothing."""

    is_template = True  # drawn by the page's slider, as its base class

    def preprocess(self, payload: float | str | None) -> float | str | None:
        return payload
