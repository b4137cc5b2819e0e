"""Section 6.1: "a single model obtained by averaging the last 5 checkpoints" (the base models the
last 5, written at 10-minute intervals; the big models the last 20)."""
from __future__ import annotations

from typing import Sequence

from ..bundle import ModelBundle
from ..model.transformer import Transformer
from .shards import unique_state


def average_checkpoints(bundles: Sequence[ModelBundle]) -> ModelBundle:
    """The element-wise mean of the bundles' weights (all of one model config), each tied matrix averaged
    once; the tokenizer and info of the last bundle, less its metrics (they measured that checkpoint, not
    the average), and no path: saving it must go to a folder of its own."""
    if not bundles:
        raise ValueError("no checkpoints to average")
    first = bundles[0]
    config, vocabulary = first.model.config, _vocabularies(first)
    for bundle in bundles[1:]:
        if bundle.model.config != config:
            theirs, ours = bundle.model.config.to_dict(), config.to_dict()
            fields = ", ".join(f"{k} {theirs[k]} (not {ours[k]})" for k in ours if theirs[k] != ours[k])
            raise ValueError(f"{bundle.path or bundle.name} has a different model config from "
                             f"{first.path or first.name}: {fields}; cannot average")
        if _vocabularies(bundle) != vocabulary:  # same shapes, other token ids: the mean would be noise
            raise ValueError(f"{bundle.path or bundle.name} has a different tokenizer (vocabulary) from "
                             f"{first.path or first.name}; only checkpoints of one run can be averaged")
    states = [unique_state(b.model, None) for b in bundles]
    # A fresh dict of means before anything is written: the tied matrix appears under three
    # names in a state_dict, and averaging into a model's own tensors would mix it three times.
    mean = {name: sum(s[name].float() for s in states) / len(states) for name in states[0]}
    model = Transformer(config)
    model.load_state_dict(mean, strict=False)  # the tied names left out share the one tensor loaded
    last = bundles[-1]
    info = {key: value for key, value in last.info.items() if key != "metrics"}
    return ModelBundle(model.eval(), last.tokenizer, info, separate_target=last.separate_target)


def _vocabularies(bundle: ModelBundle) -> tuple[str, str]:
    return bundle.tokenizer.to_json(), bundle.target_tokenizer.to_json()
