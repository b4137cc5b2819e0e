"""The views of a model's parts, each a line in a notebook: the positional encodings (3.5), where the parameters
are, the learning-rate schedule (5.3), the label-smoothed target (5.4), the masks (3.2.3), and our Table 3.

The Model tab's four views are drawn by the functions the tab draws them with (studio/numbers/model_parts.py), which
load no Gradio.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from core.model.positional import encoding_at, sinusoidal_encoding

from .. import plots
from ..numbers import comparison
from ..numbers import model_parts as parts
from ..plots import side_by_side
from .models import Model, bundle_of
from .view import View

POSITIONAL_PARTS = ("heatmap", "curves", "similarity")


def positional_encoding(d_model: int | Model = 512, *, length: int = 60, part: str = "heatmap",
                        dims: Sequence[int] | None = None) -> View:
    """Section 3.5's sinusoids for d_model dimensions (or a model's own d_model) and `length` positions: the table
    ("heatmap"), a few dimensions as curves ("curves"; dims: which, by default a sine-cosine pair and two slower
    ones) or every position's dot product with every other ("similarity"). numbers: the table, PE[pos][i]."""
    if part not in POSITIONAL_PARTS:
        raise ValueError(f"unknown part {part!r}; allowed: {', '.join(POSITIONAL_PARTS)}")
    width = d_model if isinstance(d_model, int) else bundle_of(d_model).model.config.d_model
    if width < 2 or width % 2 or length < 1:
        raise ValueError(f"d_model must be even and at least 2 (sin and cos come in pairs), length at least 1; "
                         f"got d_model {width}, length {length}")
    table = sinusoidal_encoding(length, width).numpy()
    if part == "heatmap":
        figure = plots.pe_heatmap(table)
    elif part == "similarity":
        figure = plots.pe_similarity(table)
    else:
        dims = sorted({0, 1, width // 8 // 2 * 2, width // 4 // 2 * 2}) if dims is None else list(dims)
        if not all(0 <= d < width for d in dims):
            raise ValueError(f"dims must be dimensions of the encoding, 0..{width - 1}; got {dims}")
        between = np.linspace(0, length - 1, 8 * (length - 1) + 1)  # 8 points a position: smooth at 2π
        figure = plots.pe_curves(table, dims, (between, encoding_at(torch.from_numpy(between), width).numpy()))
    return View(figure, {"d_model": width, "positions": length, "encoding": table.tolist()}, "",
                f"positional encoding, {part}")


def learned_positions(model: Model, *, length: int = 60, part: str = "table") -> View:
    """A model's learned positions (Table 3, row E) for the first `length` positions: the table ("table") or the
    cosine of every position's vector with every other's ("similarity")."""
    bundle = bundle_of(model)
    if bundle.model.config.positional != "learned":
        raise ValueError(f"{bundle.name} adds sinusoids (section 3.5), not learned positions: see "
                         f"positional_encoding({bundle.model.config.d_model})")
    table = bundle.model.positions.table.detach()[: max(1, length)].float().numpy()
    figure = plots.learned_heatmap(table, bundle.name) if part == "table" else plots.learned_similarity(table)
    return View(figure, {"positions": table.tolist()}, "", f"learned positions, {part}")


def parameters(model: Model) -> View:
    """Where the parameters are, by kind of part; numbers: every component layer by layer, and the groups."""
    bundle = bundle_of(model)
    groups = parts.parameter_groups(bundle)
    rows = [{"component": name, "parameters": n, "note": note} for name, n, note in parts.parameter_rows(bundle)]
    line, _ = parts.summary(bundle)
    return View(plots.parameter_shares(groups), {"components": rows, "groups": groups,
                                                 "total": bundle.model.num_parameters()}, line, "parameters")


def _trained_with(bundle):
    return parts.training_config(bundle) or parts.PAPER_SCHEDULE


def schedule(model: Model, *, warmup: int | None = None, steps: int | None = None) -> View:
    """The learning-rate schedule the model trained with (its record; the paper's eq. 3 without one), with
    warmup_steps `warmup` (default: its own) over `steps` steps (default: its whole run)."""
    bundle = bundle_of(model)
    trained = _trained_with(bundle)
    warmup = trained.warmup if warmup is None else warmup
    steps = math.ceil(trained.max_steps / 100) * 100 if steps is None else steps
    figure = parts.lr_figure(bundle, warmup, steps)
    return View(figure, {"warmup": warmup, "steps": steps, "schedule": trained.schedule}, parts.schedule_line(
        bundle), "learning-rate schedule")


def label_smoothing(model: Model, *, eps: float | None = None) -> View:
    """The label-smoothed target (5.4) the model trained towards for one reference token, with ε `eps` (default:
    its own), on 12 vocabulary entries around it."""
    bundle = bundle_of(model)
    eps = _trained_with(bundle).label_smoothing if eps is None else eps
    if not 0 <= eps < 1:
        raise ValueError(f"eps must be in [0, 1); got {eps}")
    first = parts.example_translation(bundle, parts.example_sentences(bundle))
    return View(parts.smoothing_figure(bundle, eps, first.ids), {"eps": eps}, "", "label smoothing")


def masks(model: Model, sentences: Sequence[str] | None = None) -> View:
    """The masks of a batch of up to three sentences (default: the model's examples): the source padding mask,
    and the decoder's causal mask of the first one's translation."""
    bundle = bundle_of(model)
    sentences = list(sentences) if sentences else parts.example_sentences(bundle)
    first = parts.example_translation(bundle, sentences)
    return View(parts.mask_figure(bundle, sentences, first), {"sentences": sentences[:3]}, "", "masks")


def table3() -> View:
    """Our Table 3 (bench/table3.py's runs, docs/table3.csv): each variation's change from the base beside the
    paper's. numbers: the runs, one dict each."""
    rows = comparison.table3_rows()
    figure = side_by_side.table3(rows, "Our Table 3: each change from the base, beside the paper's") if rows else None
    if figure is None:
        raise FileNotFoundError(f"{comparison.TABLE3_CSV} holds no scored base run yet: bench/table3.py writes it")
    return View(figure, {"runs": rows}, f"{len(rows)} runs scored (docs/table3.csv; docs/table3.md says how)",
                "table 3")
