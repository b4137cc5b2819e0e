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
