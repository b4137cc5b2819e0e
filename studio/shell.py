"""What the tabs share: the Shell (registry, model picker, app, the picked model's key), the
picker's and status line's contents, and a session's current translation (Current), which the
Translate tab makes and the Attention, Beam search, What if, Attention arithmetic and Saliency tabs
read; the What if tab can put a target of its own in it (Current.forced) for the other tabs to show.

The Train tab adds the model it trains with ``ModelRegistry.add(name, bundle)`` and refreshes
the picker with ``picker_update(registry, name)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from core.bundle import ModelBundle
from core.inference.options import DecodeOptions

from .server.registry import UNAVAILABLE, ModelRegistry, describe, examples_for
from .text import md



@dataclass
class Shell:
    """What every tab needs: the registry, the picked model's name (an input to callbacks) and its
    registry key, whose .change is the event "another model is picked": a new training run under the
    picked name changes the key but not the picker's value, which fires no .change of its own."""

    registry: ModelRegistry
    model: gr.Dropdown
    demo: gr.Blocks
    model_key: gr.State


# ----- the model picker and the status line beside it ----------------------------------------
def status_line(registry: ModelRegistry, name: str | None) -> str:
    """The picked model in one line (or why there is none to use)."""
    if not registry.names():
        return ("**No model yet.** Put a checkpoint folder in `checkpoints/`, start with "
                "`--checkpoint PATH`, or open one below.")
    try:
        bundle = registry.get(name)
    except UNAVAILABLE as exc:
        return f"**Model {md(name)} cannot be used:** {md(exc)}"
    facts = describe(bundle)
    data = f" · trained on {md(facts['trained_on'])}" if facts["trained_on"] else ""
    return (f"**{md(name)}**{data} · {facts['parameters']} parameters · vocabulary {facts['vocab']} · "
            f"{facts['layers']} · {facts['device']}")


def picker_update(registry: ModelRegistry, name: str | None) -> gr.Dropdown:
    """The picker's choices as they are now, keeping name picked while it is offered: a value not
    among the choices (a model removed meanwhile) made Gradio refuse every later event reading it."""
    return gr.Dropdown(choices=registry.choices(), value=name if name in registry.names() else None)


def refresh(registry: ModelRegistry, name: str | None) -> tuple[gr.Dropdown, str, tuple[str, int] | None]:
    """On page load: the picker's choices as they are now (a Train tab may have added some)."""
    return picker_update(registry, name), status_line(registry, name), registry.key(name)


# ----- the session's current translation ------------------------------------------------------
@dataclass
class Current:
    """The last translation of this browser session, for the Attention and Beam search tabs, and the
    sentence pair the explaining tabs look at."""

    model: str | None = None
    source: str = ""
    ids: list[int] = field(default_factory=list)
    options: DecodeOptions | None = None
    key: tuple | None = None  # the model's registry key: a new training run under its name is another model
    # The model as it translated: a training run's later snapshots, under the same key, have other weights,
    # and the Attention tab's maps and head ablation must read the weights that wrote this translation.
    bundle: ModelBundle | None = None
    # A target the What if tab forced on the model (ids, no bos/eos): the Attention, Attention arithmetic and
    # Saliency tabs then show that pair, teacher forced, instead of the translation (ids stays the model's own).
    forced: list[int] | None = None

    @property
    def target_ids(self) -> list[int]:
        """The target the tabs look at: the forced one, else the translation."""
        return self.ids if self.forced is None else self.forced


def switched(registry: ModelRegistry, current: Current, picked: str | None) -> bool:
    """Whether the picked model is not the one current was translated with (same name: a new run)."""
    return current.model is not None and current.key != registry.key(picked)


def picked_examples(registry: ModelRegistry, name: str | None) -> list[str]:
    """examples_for() the picked model; none when it cannot be loaded."""
    try:
        return examples_for(registry.get(name))
    except UNAVAILABLE:
        return []
