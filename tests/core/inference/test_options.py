"""core.inference.options: a DecodeOptions is checked once, when it is made; the translator and the decoders
that take one trust it, so one translation (the studio's Translate click, core.translate) checks its options once."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from core.inference.options import DecodeOptions, resolve_options
from core.inference.translation import translate, translate_detailed
from tests.helpers.models import tiny_bundle


@pytest.fixture(scope="module")
def bundle():
    return tiny_bundle()


@pytest.fixture
def checks(monkeypatch) -> list[DecodeOptions]:
    """Every DecodeOptions.validate call from here on, by the options it checked."""
    seen, validate = [], DecodeOptions.validate
    monkeypatch.setattr(DecodeOptions, "validate", lambda self: (seen.append(self), validate(self))[1])
    return seen


def test_options_are_checked_when_made():
    with pytest.raises(ValueError, match="DecodeOptions.beam_size must be an integer >= 1; got 0"):
        DecodeOptions(beam_size=0)
    with pytest.raises(ValueError, match="DecodeOptions.top_p"):
        dataclasses.replace(DecodeOptions(), top_p=1.5)  # a changed copy is made, so checked too


def test_options_without_overrides_are_used_as_they_are(checks):
    options = DecodeOptions(method="greedy")
    assert resolve_options(options, {}) is options and resolve_options(None, {}).method == "beam"
    resolved = resolve_options(options, {"max_len_b": np.int64(7)})  # numpy's integers are whole numbers too
    assert resolved.max_len_b == 7 and type(resolved.max_len_b) is int and options.max_len_b == 50
    assert len(checks) == 3  # options, DecodeOptions() and the copy with max_len_b: each once, when made


@pytest.mark.parametrize("method", ["beam", "greedy", "sample"])
def test_one_translation_checks_its_options_once(bundle, checks, method):
    options = DecodeOptions(method=method, seed=1 if method == "sample" else None)
    translate_detailed(bundle, ["a b", "c d e"], options)
    assert checks == [options]
    checks.clear()
    translate(bundle, ["a b"], method=method, beam_size=2)  # keywords: one DecodeOptions made of them
    assert len(checks) == 1
