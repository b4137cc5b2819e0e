"""`train --resume`: the run goes on only with its own data, split, vocabulary, direction and model, from
its latest checkpoint's optimizer, schedule and batcher state."""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint, load_trainer_state
from core.data.corpus import ParallelCorpus
from core.data.files import absolute_spec
from core.model.config import ModelConfig
from core.training.prepare import RunPlan

from .args import MODEL_FLAGS
from .common import CLIError, run_checkpoints
from .files import write_output
from .run_record import data_fingerprint

# The tokenizer's kind and the direction: from the checkpoint.
SPLIT_OPTIONS = ("seed", "limit", "valid_fraction", "vocab_size", "src_vocab_size", "tgt_vocab_size")


def check_same_data(given: dict[str, Any], record: dict) -> None:
    """--resume: the options that chose the training pairs, the carved valid/test split and the vocabulary
    stay the run's (another --seed would put the run's held-out pairs into training). given: the options' values
    now, by name (SPLIT_OPTIONS and max_tokens)."""
    def changed(keys: tuple[str, ...]) -> list[str]:
        return [f"--{key.replace('_', '-')} {given[key]} (the run's: {record[key]})" for key in keys
                if key in record and str(given[key]) != record[key]]

    refuse_changes(changed(SPLIT_OPTIONS), "the run's data split and vocabulary come from its own values")
    # The batcher's saved place is a place in the run's own batches, which --max-tokens cut.
    refuse_changes(changed(("max_tokens",)), "a resume takes the run's batches up where it stopped, and they "
                                              "were cut to the run's size")


def check_same_pairs(data: str, record: dict, fingerprint: str) -> None:
    """--resume: the data must hold the run's pairs (fingerprint: data_fingerprint of the corpus read now);
    a new --data path is taken if it does (moved data)."""
    if not record.get("data"):
        return
    # A record written before run.json kept absolute paths.
    same_path = data in (record["data"], absolute_spec(record["data"]))
    if "data_fingerprint" in record:
        if fingerprint != record["data_fingerprint"]:
            then = "" if same_path else f" ({record['data']})"
            raise CLIError(f"--resume: --data {data} holds other training or validation pairs than the run "
                           f"was trained on{then}; give the run's data (moved is fine), or start a new run")
    elif not same_path:  # a run from before fingerprints: nothing to check against
        print(f"note: --resume reads --data {data}, not the run's {record['data']}: its valid and test "
              f"pairs stay the run's only if it holds the same lines", file=sys.stderr)


def check_same_vocabulary_and_direction(plan: RunPlan, corpus: ParallelCorpus, bundle: ModelBundle) -> None:
    """--resume: the checkpoint's tokenizer and languages are the run's; --tokenizer, --src or --tgt
    that name others are refused (the same ones, given again, are fine)."""
    changed = []
    if plan.tokenizer != bundle.tokenizer.kind:
        changed.append(f"--tokenizer {plan.tokenizer} (the run's: {bundle.tokenizer.kind})")
    for flag, now, then in (("--src", corpus.src_lang, bundle.info.get("src_lang")),
                            ("--tgt", corpus.tgt_lang, bundle.info.get("tgt_lang"))):
        if then is not None and now != then:
            changed.append(f"{flag} {now} (the run's: {then})")
    refuse_changes(changed, "the run's checkpoints were trained that way")


def refuse_changes(changed: list[str], why: str) -> None:
    """--resume: refuse options given with other values than the run's, each as "--flag now (the run's: then)"."""
    if changed:
        them = "it" if len(changed) == 1 else "them"
        raise CLIError(f"--resume: {', '.join(changed)}: {why}; leave {them} out to keep the run's, "
                       f"or start a new run")


@contextlib.contextmanager
def damaged_checkpoint_hint(out: Path, latest: Path):
    """--resume always starts from the latest checkpoint: if it cannot be read, say how to start from the one
    before (run_checkpoints only lists step-* folders)."""
    try:
        yield
    except ValueError as exc:
        earlier = run_checkpoints(out)[:-1]
        aside = out / f"damaged-{latest.name}"
        way = (f"to go on from {earlier[-1].name}, move the damaged one aside: mv {latest} {aside}" if earlier
               else "it is the run's only checkpoint: start a new run")
        raise CLIError(f"--resume: {exc}; {way}") from None


def resumed_bundle(out: Path, plan: RunPlan, record: dict, corpus: ParallelCorpus, latest: Path) -> ModelBundle:
    """--resume: the run's latest checkpoint (in the run folder out), once the data, vocabulary, direction and
    model config given are found to be the run's; its record names the data as read now."""
    with damaged_checkpoint_hint(out, latest):
        bundle = load_checkpoint(latest)
    check_same_vocabulary_and_direction(plan, corpus, bundle)  # first: a reversed direction swaps the pairs
    check_same_pairs(plan.data, record, data_fingerprint(corpus))
    check_same_model(plan, bundle, f"--resume: the run in {out}")
    bundle.info.update(name=out.name, src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang,
                       data=corpus.description, examples=corpus.examples())
    return bundle


def check_same_model(plan: RunPlan, bundle: ModelBundle, whose: str) -> None:
    """The model config the options ask for is the checkpoint's (whose: the checkpoint in words, for the message)."""
    flag = whose.split(":")[0]
    # A run from before --attention-bias existed has biases without the flag in its run.json: the flag
    # can only add them, so without it the run keeps its own.
    overrides = {"attention_bias": bundle.model.config.attention_bias, **plan.model_overrides}
    if plan.separate_vocab and bundle.model.config.shared_vocab:  # the flag, kept in run.json, can only add it
        raise CLIError(f"{whose} shares one vocabulary between its languages; leave out --separate-vocab to keep "
                       f"its own")
    wanted = ModelConfig.from_preset(plan.preset, src_vocab_size=bundle.tokenizer.vocab_size,
                                     tgt_vocab_size=bundle.target_tokenizer.vocab_size,
                                     shared_vocab=bundle.model.config.shared_vocab, **overrides)
    if wanted != bundle.model.config:
        given = wanted.to_dict()
        diff = ", ".join(f"{MODEL_FLAGS.get(k, k)} {v} (now {given[k]})"
                         for k, v in bundle.model.config.to_dict().items() if given[k] != v)
        raise CLIError(f"{whose} has a different model config: it was trained with {diff}; leave those options "
                       f"out to keep its own ({flag} takes the model as it is)")


def restore_trainer(trainer, out: Path, latest: Path, rank: int) -> None:
    """--resume: the optimizer, schedule, batcher and step of the run's latest checkpoint (in the run folder out)."""
    with damaged_checkpoint_hint(out, latest):
        state = load_trainer_state(latest)
    if state is None:
        raise CLIError(f"--resume: {latest} holds weights but no trainer state (trainer.pt), so the "
                       f"optimizer and step cannot be restored; was it written by `average`?")
    trainer.load_state_dict(state)
    if trainer.step_count >= trainer.config.max_steps:
        raise CLIError(f"--resume: the run in {out} is already at step {trainer.step_count}; give a "
                       f"larger --max-steps (or --epochs) to train on")
    if trainer.keeper and trainer.keeper.exhausted:
        raise CLIError(f"--resume: the run in {out} stopped early: its best {trainer.keeper.describe()} was "
                       f"followed by {trainer.keeper.since_best} evaluations without a better one; give a --patience "
                       f"larger than {trainer.keeper.since_best} to train on")
    if rank == 0:
        trim_metrics(out / "metrics.jsonl", trainer.step_count)


def trim_metrics(path: Path, step: int) -> None:
    """Resuming from step N: drop metrics.jsonl's records after N (steps of a killed run that will be trained
    again) and any half-written line, so that each step is logged once."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line + "\n")
        except (ValueError, KeyError, TypeError):
            continue
    write_output(path, "".join(kept))
