"""The sentence pair the Attention arithmetic and Saliency tabs explain: the session's current
translation, or the target the What if tab forced (Current.forced), with the weights that made it."""
from __future__ import annotations

from dataclasses import dataclass

from core.bundle import ModelBundle

from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Current, switched
from ..text import clip, md

NOTHING_YET = "*No sentence yet: translate one on the Translate tab (or force a target on the What if tab).*"


@dataclass
class Looked:
    """One sentence pair and the model that reads it."""

    model: str
    bundle: ModelBundle
    source: str
    target: list[int]  # target ids, no bos/eos
    forced: bool  # the What if tab's target, not the model's translation

    def header(self, notices: list[str] = ()) -> str:
        """The pair in words (with what was done to it on its way in), as the Attention tab says it."""
        which = "Target (forced on the What if tab)" if self.forced else "Translation"
        notes = "".join(f"  \n*{md(clip(n, 300))}*" for n in notices)
        return (f"**Model:** {md(self.model)}  \n**Source:** {md(self.source)}{notes}  \n"
                f"**{which}:** {md(self.bundle.target_tokenizer.decode(self.target)) or '*(empty)*'}")


def looked_at(registry: ModelRegistry, current: Current | None, picked: str | None) -> Looked | str:
    """The pair current holds, or why there is none to explain (Markdown)."""
    if current is None or not current.source or current.model is None:
        return NOTHING_YET
    if switched(registry, current, picked):
        return (f"*Model changed to **{md(picked)}**: translate again (Translate tab) to explain its translation; "
                f"the last sentence was translated with {md(current.model)}.*")
    try:
        bundle = current.bundle or registry.get(current.model)
    except UNAVAILABLE as exc:
        return f"**Cannot explain:** {md(exc)}"
    return Looked(current.model, bundle, current.source, list(current.target_ids), current.forced is not None)
