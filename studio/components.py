"""What every tab is built from: Gradio components with the studio's manners, and the studio's stylesheet
and browser scripts, read from the files in studio/static/.

Each .js file holds one JavaScript function, as Gradio takes it (``launch(js=...)``, an event's
``js=...``), under comment lines that say what it does and why: those stay on the server, and
the browser gets the function alone.
"""
from __future__ import annotations

from importlib import resources

import gradio as gr

STATIC = resources.files(__package__).joinpath("static")


def stylesheet(name: str) -> str:
    return STATIC.joinpath(name).read_text(encoding="utf-8")


def script(name: str, **values: object) -> str:
    """The function in static/NAME; each keyword names a placeholder in it (e.g. SCALE=1.4) and the
    value written in its place."""
    lines = STATIC.joinpath(name).read_text(encoding="utf-8").splitlines()
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    function = "\n".join(lines).strip()
    for placeholder, value in values.items():
        function = function.replace(placeholder, str(value))
    return function



def refresh_on_screen(current: gr.State, tab_elem_id: str) -> gr.Button:
    """A trigger for the tab's redraw when the session's translation changes, set off in the page, and only while
    the tab is on screen (static/refresh_on_screen.js): its hidden button. A tab's redraw on current.change ran
    a server call for every tab at every translation, each to find its tab off screen."""
    button = gr.Button("Redraw for the new translation", elem_id=f"{tab_elem_id}-refresh",
                       elem_classes="visually-hidden")
    current.change(None, js=script("refresh_on_screen.js", TAB_ID=tab_elem_id), show_progress="hidden")
    return button


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
