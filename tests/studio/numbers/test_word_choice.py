"""The Word choice tab's numbers (studio/numbers/word_choice.py) on the shipped models: the logit lens, teacher
forcing against free running and a contrast of the first view, as JSON; calibration of one model or two of one
language pair, cut to the request's budget; bad input refused by name."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from studio.numbers import word_choice as W
from studio.numbers.explanations import Refused
from studio.server import slots
from studio.server.limits import PUBLIC_BUDGET
from studio.server.registry import ModelRegistry

GERMAN, NUMBERS = "multi30k-de-en-small", "numbers-en-de-tiny"


@pytest.fixture(scope="module")
def shipped_registry():
    return ModelRegistry()


def test_the_first_view(shipped_registry):
    bundle = shipped_registry.get(GERMAN)
    lens = W.lens(bundle, W.FIRST_SOURCE)
    assert lens.tokens[W.FIRST_POSITION] == "▁dogs" and W.runner_up(lens, 1) != "▁dogs"
    exposure = W.exposure(bundle, W.FIRST_SOURCE, W.FIRST_REFERENCE)
    assert exposure.diverges_at == 2 and exposure.said_there == "▁play"
    why = W.why_not(bundle, W.FIRST_SOURCE, W.FIRST_POSITION, W.FIRST_FOIL)
    assert (why.token, why.foil, why.method) == ("▁dogs", "▁cat", "integrated_gradients") and why.normalized[1] > 0.3
    for answer in (W.lens_json(lens), W.exposure_json(exposure), W.contrast_json(why)):
        json.dumps(answer, allow_nan=False)
    assert W.lens_json(lens)["layers"][-1]["rank"] == [1] * len(lens.tokens)
    assert W.target_tokens(bundle, W.FIRST_SOURCE, bundle.target_tokenizer.encode("Two dogs.")) == [
        "▁Two", "▁dogs.", "<eos>"]


def test_bad_input_is_refused_by_name(shipped_registry):
    bundle = shipped_registry.get(GERMAN)
    for call, message in [(lambda: W.lens(bundle, ""), "source sentence is empty"),
                          (lambda: W.lens(bundle, "Hunde.", 0), "top_k must be from 1 to 20"),
                          (lambda: W.exposure(bundle, "Hunde.", " "), "reference is empty"),
                          (lambda: W.why_not(bundle, "Hunde.", 9, "cats"), "position must be from 0 to"),
                          (lambda: W.why_not(bundle, "Hunde.", 0, "cats", "rank"), "unknown objective"),
                          (lambda: W.why_not(bundle, "Hunde.", "one", "cats"), "position must be a whole number")]:
        with pytest.raises(Refused, match=message):
            call()


def test_calibration_of_one_model_and_of_two_within_the_budget(shipped_registry, monkeypatch):
    seen = []
    [one], described, notices = W.calibration_view(shipped_registry, [NUMBERS, ""], "synthetic: numbers", "valid",
                                                   20, seen.append)
    assert one.name == NUMBERS and one.calibration.sentences == 20 and notices == [] and sum(seen) == 40
    json.dumps(W.calibration_json([one], described), allow_nan=True)
    with pytest.raises(Refused, match="translate different language pairs"):
        W.calibration_view(shipped_registry, [NUMBERS, GERMAN], "synthetic: numbers", "valid", 20)
    monkeypatch.setattr(slots, "current_budget", lambda: replace(PUBLIC_BUDGET, cpu_s=0.02))
    [cut], described, notices = W.calibration_view(shipped_registry, [NUMBERS], "synthetic: numbers", "valid", 20)
    assert cut.calibration.sentences < 20 and notices[0].startswith("measured on the first")
