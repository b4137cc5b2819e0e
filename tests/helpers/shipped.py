"""The checkpoints the repository ships (checkpoints/), for the tests that read them; tests/conftest.py's
`shipped` and `numbers` fixtures load the two the tests use most."""
from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import core
import train_cli

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
SHIPPED = CHECKPOINTS / "multi30k-de-en-small"  # German→English, Multi30k
NUMBERS = CHECKPOINTS / "numbers-en-de-tiny"  # the synthetic numbers task, English words → German


def sensible_share(bundle, cases: list[tuple[str, tuple[str, ...]]], target: str) -> tuple[int, list[str]]:
    """How many of the hand-written cases (a sentence, the words any fair translation holds) a two-way model
    translates into target with all their words, and its translations."""
    outputs = core.translate(bundle, [s for s, _ in cases], target_lang=target, beam_size=4)
    return sum(all(word in out.lower() for word in words) for out, (_, words) in zip(outputs, cases)), outputs


def first_100_against_card(model: Path, data: str, target: str) -> tuple[tuple[float, float], dict]:
    """`train_cli.py evaluate` of the first 100 test sentences (beam 4, every reference) into target: its (BLEU,
    chrF) and the card's figures for them (config.json's metrics)."""
    card = json.loads((model / "config.json").read_text())["metrics"][f"test_first100_to_{target}_beam4"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert train_cli.main(["evaluate", "--checkpoint", str(model), "--data", data, "--tgt", target,
                               "--all-references", "--limit", "100"]) == 0
    scores = tuple(float(re.search(rf"^{name} = ([\d.]+)", out.getvalue(), re.M).group(1)) for name in ("BLEU", "chrF"))
    return scores, card
