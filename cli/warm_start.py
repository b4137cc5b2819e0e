"""`train --warm-start CHECKPOINT`: a new run that goes on from a checkpoint's weights when its trainer state is lost
(a shipped or averaged model; a run whose machine is gone): the checkpoint's vocabulary and model, its data and split,
the schedule taken up at its step. Adam's moments start again at zero (Trainer.warm_start ramps the rate back in), so
this is a continuation, not the exact resume that --resume is."""
from __future__ import annotations

from pathlib import Path

import torch

from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint
from core.data.corpus import ParallelCorpus
from core.training.prepare import RunPlan

from .common import CLIError
from .resume import check_same_model, check_same_vocabulary_and_direction

# What says which pairs a checkpoint learnt from and held out, in its record of the data (not the files' paths,
# which differ between machines).
SPLIT_FACTS = ("columns", "counts", "carved", "directions", "added_training")


def warm_bundle(path: Path, plan: RunPlan, corpus: ParallelCorpus) -> ModelBundle:
    """The checkpoint at path, in fp32 for training, once its vocabulary, direction, model and data split are found
    to be the run's."""
    try:
        bundle = load_checkpoint(path)
    except (OSError, ValueError) as exc:
        raise CLIError(f"--warm-start: {exc}") from None
    if not isinstance(bundle.info.get("step"), int):
        raise CLIError(f"--warm-start: {path} does not say the step it was trained to (its config.json has no "
                       f"\"step\"), so the schedule cannot be taken up there")
    check_same_vocabulary_and_direction(plan, corpus, bundle)
    check_same_model(plan, bundle, f"--warm-start: {path}")
    check_same_split(path, bundle.info.get("data") or {}, corpus.description)
    bundle.model.to(torch.float32)  # a shipped checkpoint is stored in half precision
    bundle.info.update(src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang, data=corpus.description,
                       examples=corpus.examples(), warm_started_from={"checkpoint": str(path),
                                                                      "step": bundle.info["step"]})
    bundle.info.pop("metrics", None)  # the checkpoint's figures are not the new run's
    return bundle


def check_same_split(path: Path, then: dict, now: dict) -> None:
    """The data read now holds as many pairs, carved the same way, as the checkpoint's did: other held-out pairs
    would let it train on its own validation and test sentences."""
    changed = [key for key in SPLIT_FACTS if _without_paths(then.get(key)) != _without_paths(now.get(key))]
    if changed:
        facts = "; ".join(f"{key}: {then.get(key)} then, {now.get(key)} now" for key in changed)
        raise CLIError(f"--warm-start: {path} was trained on other data or another split ({facts}); give its data, "
                       f"--seed and options (its config.json's \"data\" and \"train\" say them)")


def _without_paths(fact: object) -> object:
    """added_training's corpora by their sizes, not where their files were."""
    if isinstance(fact, list) and all(isinstance(item, dict) for item in fact):
        return [{k: v for k, v in item.items() if k != "source"} for item in fact]
    return fact


def warm_up_trainer(trainer, path: Path) -> None:
    """The schedule taken up at the checkpoint's step (the bundle prepared by warm_bundle carries it)."""
    step = trainer.bundle.info["step"]
    if step >= trainer.config.max_steps:
        raise CLIError(f"--warm-start: {path} is already at step {step}; give a larger --max-steps to train on")
    trainer.warm_start(step)
