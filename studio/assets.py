"""The studio's stylesheet and browser scripts, read from the files in studio/static/.

Each .js file holds one JavaScript function, as Gradio takes it (``launch(js=...)``, an event's
``js=...``), under comment lines that say what it does and why: those stay on the server, and
the browser gets the function alone.
"""
from __future__ import annotations

from importlib import resources

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
