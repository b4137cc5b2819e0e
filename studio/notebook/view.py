"""What every notebook view returns: a studio figure that shows itself inline, saves, and gives its numbers.

A ``View`` is one plotly figure of studio/plots/ with its numbers: ``numbers`` is the JSON the studio gives for
that view (its API's where it has an endpoint, the figure's Download JSON otherwise), ``table()`` the Download
menu's CSV as a DataFrame (a row per point, tokens named), ``json()`` its JSON (every trace's arrays, every axis's
title and labels). Both are studio/static/downloads.js's, read from the figure in Python. A ``Page`` is one of
bertviz's views: HTML that works offline, inline or saved.
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import plotly.graph_objects as go

from ..text import md

CSV_COLUMNS = ["trace", "x", "x_label", "y", "y_label", "value", "text", "x_title", "y_title", "value_title"]


def plain_text(text: Any) -> str:
    """Plot text (plotly's HTML subset, the studio's tokens escaped) as what it reads: "&lt;eos&gt;" is "<eos>"."""
    if text is None:
        return ""
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", " ", str(text), flags=re.I)))


def _plain(value: Any) -> Any:
    """A trace's array (numpy, tuple) as nested lists; anything else as it is."""
    return value.tolist() if hasattr(value, "tolist") else [_plain(v) for v in value] if isinstance(
        value, (list, tuple)) else value


def _note(value: Any) -> Any:
    """Hover notes as plain text, element by element."""
    if isinstance(value, list):
        return [_note(v) for v in value]
    return plain_text(value) if isinstance(value, str) else value


def _title(obj: Any) -> str:
    title = getattr(obj, "title", None)
    return plain_text(getattr(title, "text", None) if title is not None else None)


def _axis_labels(fig: go.Figure, ref: str) -> tuple[str, dict[float, str]]:
    """An axis's title and its labels by position: every token where the figure lists them all
    (layout.meta.labels, which the studio's figures write when their ticks name one in k), else its tick labels."""
    name = re.sub(r"^([xy])", r"\1axis", ref)
    axis = fig.layout[name] if name in fig.layout else None
    listed = ((fig.layout.meta or {}).get("labels") or {}).get(name)
    if listed is not None:
        labels = {float(v): plain_text(text) for v, text in listed}
    else:
        values, texts = (getattr(axis, "tickvals", None) or ()), (getattr(axis, "ticktext", None) or ())
        labels = {float(v): plain_text(text) for v, text in zip(values, texts)}
    return _title(axis), labels


def _scale_title(fig: go.Figure, trace: Any) -> str:
    """What a trace's colour means: its colour bar's title (its own, or its shared colour axis's)."""
    shared = getattr(trace, "coloraxis", None)
    bar = fig.layout[shared].colorbar if shared else getattr(trace, "colorbar", None)
    return _title(bar) if bar is not None else ""


def _arrays(trace: Any) -> dict[str, Any]:
    get = trace.to_plotly_json().get
    return {key: _plain(get(key)) for key in ("x", "y", "z", "text", "customdata")}


def _label(labels: dict[float, str], value: Any) -> str:
    try:
        return labels.get(float(value), "")
    except (TypeError, ValueError):  # a category axis: the value is its own label
        return ""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _trace_rows(fig: go.Figure, i: int, trace: Any) -> list[dict[str, Any]]:
    """One trace's points as the Download menu's CSV rows."""
    t = _arrays(trace)
    (x_title, x_labels), (y_title, y_labels) = (_axis_labels(fig, trace.xaxis or "x"),
                                                _axis_labels(fig, trace.yaxis or "y"))
    name, value_title = plain_text(trace.name) or f"{trace.type} {i + 1}", _scale_title(fig, trace)
    notes = t["customdata"] if t["customdata"] is not None else t["text"]
    points = []  # (x, y, value, hover note)
    if isinstance(t["z"], list):
        for r, line in enumerate(t["z"]):
            points += [(t["x"][c] if isinstance(t["x"], list) else c, t["y"][r] if isinstance(t["y"], list) else r,
                        value, notes[r][c] if isinstance(notes, list) else None)
                       for c, value in enumerate(line or []) if _finite(value)]
    else:
        xs, ys = t["x"] or [], t["y"] or []
        for k in range(max(len(xs), len(ys))):
            x, y = (xs[k] if xs else k), (ys[k] if ys else k)
            if x is not None and y is not None:
                points.append((x, y, y if trace.type in ("bar", "scatter") else "",
                               notes[k] if isinstance(notes, list) and k < len(notes) else None))
    return [dict(zip(CSV_COLUMNS, (name, x, _label(x_labels, x), y, _label(y_labels, y), value, _note(note), x_title,
                                   y_title, value_title))) for x, y, value, note in points]


def figure_rows(fig: go.Figure) -> list[dict[str, Any]]:
    """The Download menu's CSV as rows: one per point (heatmap cells with a value, bars, markers)."""
    return [row for i, trace in enumerate(fig.data) for row in _trace_rows(fig, i, trace)]


def _axis_names(fig: go.Figure) -> list[str]:
    used = {re.sub(r"^([xy])", r"\1axis", ref) for t in fig.data for ref in (t.xaxis or "x", t.yaxis or "y")}
    laid_out = {k for k in fig.layout.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", k)}
    return sorted(used | laid_out)


def _number_key(value: float) -> str:
    """A position as JavaScript writes it as a key: 3, not 3.0."""
    return str(int(value)) if float(value).is_integer() else str(value)


def figure_json(fig: go.Figure, name: str = "plot") -> dict[str, Any]:
    """The Download menu's JSON: the plot's title, every axis's title and labels, every trace's arrays."""
    axes = {}
    for axis in _axis_names(fig):
        title, labels = _axis_labels(fig, axis.replace("axis", ""))
        axes[axis] = {"title": title, "tick_labels": {_number_key(v): text for v, text in labels.items()}}
    traces = []
    for trace in fig.data:
        arrays = _arrays(trace)
        kept = {"type": trace.type, "name": plain_text(trace.name), "xaxis": trace.xaxis or "x",
                "yaxis": trace.yaxis or "y", "value_title": _scale_title(fig, trace)}
        kept.update({key: _note(value) if key in ("text", "customdata") else value
                     for key, value in arrays.items() if isinstance(value, list)})
        traces.append(kept)
    return {"plot": name, "title": _title(fig.layout), "axes": axes, "traces": traces}


def notes(notices: Sequence[str]) -> str:
    """Notices as a Markdown list, escaped: a token such as <eos> stays text."""
    return "\n".join(f"- {md(n)}" for n in notices)


@dataclass
class View:
    """A studio figure and its numbers. Shown when it is a cell's value (the note above the figure); ``figure`` is
    the plotly figure itself (``figure.show()``, ``figure.update_layout(...)``)."""

    figure: go.Figure
    numbers: dict[str, Any] = field(default_factory=dict)  # the studio's JSON for this view
    note: str = ""  # Markdown the studio writes beside the figure
    name: str = "plot"

    def table(self):
        """The Download menu's CSV as a pandas DataFrame: a row per point, its tokens named."""
        import pandas as pd  # half a second: only when asked

        return pd.DataFrame(figure_rows(self.figure), columns=CSV_COLUMNS)

    def json(self) -> dict[str, Any]:
        """The Download menu's JSON of the figure."""
        return figure_json(self.figure, self.name)

    def write_html(self, path: str | Path, **options: Any) -> Path:
        """One HTML file that works offline (plotly.js inlined, unless include_plotlyjs says otherwise)."""
        self.figure.write_html(str(path), **{"include_plotlyjs": True, **options})
        return Path(path)

    def write_image(self, path: str | Path, **options: Any) -> Path:
        """A PNG, SVG or PDF by the file's suffix (plotly's kaleido, which needs Chrome or Chromium)."""
        try:
            self.figure.write_image(str(path), **options)
        except (ImportError, ValueError, RuntimeError) as exc:
            raise RuntimeError(f"cannot write {Path(path).name}: {exc} (pip install kaleido; it drives a Chrome or "
                               f"Chromium it finds, or one `plotly_get_chrome` installs); write_html needs neither"
                               ) from None
        return Path(path)

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, display

        if self.note:
            display(Markdown(self.note))
        display(self.figure)


SRCDOC = re.compile(r'srcdoc="([^"]*)"')


@dataclass
class Page:
    """One of bertviz's views as the studio serves it: offline (d3 and jQuery inlined) in a sandboxed frame."""

    frame: str  # the <iframe srcdoc=...> element
    numbers: dict[str, Any] = field(default_factory=dict)

    @property
    def html(self) -> str:
        """The page inside the frame: a whole HTML document that loads nothing."""
        return html.unescape(SRCDOC.search(self.frame).group(1))

    def write_html(self, path: str | Path) -> Path:
        Path(path).write_text(self.html, encoding="utf-8")
        return Path(path)

    def _repr_html_(self) -> str:
        return self.frame
