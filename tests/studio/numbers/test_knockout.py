"""The Knock out tab's numbers (studio/numbers/knockout.py) on the shipped models: a part and its place read into
core's Knockout and refused by name; one or two sentences knocked out on the registry's private copy (the model
every visitor translates with is never touched); with positions out, A's words reversed read the same; a corpus
before and after, cut to the request's budget with a notice."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.explain.knockout import Knockout
from studio.numbers import knockout
from studio.numbers.explanations import Refused
from studio.server import slots
from studio.server.limits import PUBLIC_BUDGET
from studio.server.registry import ModelRegistry

GERMAN, NUMBERS = "multi30k-de-en-small", "numbers-en-de-tiny"


@pytest.fixture(scope="module")
def shipped_registry():
    return ModelRegistry()


def test_parts_and_places_become_knockouts(shipped_registry):
    config = shipped_registry.get(GERMAN).model.config
    assert knockout.knockout_of("positions", None, config) == Knockout(positions=False)
    assert knockout.knockout_of("heads", "cross.2", config).heads == tuple(("cross", 2, h) for h in range(4))
    assert knockout.knockout_of("heads", "encoder.0.3", config).heads == (("encoder", 0, 3),)
    assert knockout.knockout_of("residual", "decoder.1.cross", config).parts == ["residual"]
    assert knockout.knockout_of("hide_source_token", "2", config).hide_source_token == 2
    for part, where, message in [("wings", None, "unknown part 'wings'"), ("layer", "decoder.7", "layers 0..2"),
                                 ("heads", "cross", "heads are written like 'cross.2'"),
                                 ("hide_source_token", "x", "a source token's index"),
                                 ("layernorm", "encoder.0.cross", "the encoder's sub-layers are self, ffn")]:
        with pytest.raises(Refused, match=message):
            knockout.knockout_of(part, where, config)
    tokens = ["▁Zwei", "▁Hunde", "<eos>"]
    for part in knockout.PARTS:  # every default place is among the choices offered
        choices = [value for _, value in knockout.where_choices(part, config, tokens)]
        assert knockout.default_where(part, config, tokens) in (choices or [None])


def test_the_first_view_knocks_positions_out_on_a_private_copy(shipped_registry):
    shared = shipped_registry.get(GERMAN).model
    weights = {k: v.clone() for k, v in shared.state_dict().items()}
    view = knockout.knockout_view(shipped_registry, GERMAN, *knockout.FIRST_PAIR, "positions", None)
    assert view.names == ["A", "B", "A's words reversed"]
    a, b, reversed_a = view.effects
    assert (a.before.text, b.before.text) == ("Two dogs chase a cat.", "A cat chasing two dogs.")
    assert a.after.text != a.before.text and reversed_a.before.text != a.before.text
    assert view.reversal_holds  # section 3.5's claim, on screen: the same tokens reordered, the same translation
    assert all(not m._forward_hooks for m in shared.modules())
    assert all(v.equal(weights[k]) for k, v in shared.state_dict().items())
    answer = knockout.knockout_json(view)
    json.dumps(answer)
    assert answer["claim"]["section"] == "3.5" and answer["sentences"][2]["sentence"] == "A's words reversed"


def test_one_sentence_and_refusals(shipped_registry):
    view = knockout.knockout_view(shipped_registry, GERMAN, "Zwei Hunde jagen eine Katze.", "  ",
                                  "hide_source_token", 1)
    assert view.names == ["A"] and view.reversal_holds is None and "officers" in view.effects[0].after.text
    with pytest.raises(Refused, match="source sentence is empty"):
        knockout.knockout_view(shipped_registry, GERMAN, "", "", "scale", None)
    with pytest.raises(Refused, match="past the source's 7 tokens"):
        knockout.knockout_view(shipped_registry, GERMAN, "Zwei Hunde jagen eine Katze.", "", "hide_source_token", 9)
    with pytest.raises(Refused, match="no model called"):
        knockout.knockout_view(shipped_registry, "nope", "Zwei Hunde.", "", "scale", None)


def test_a_corpus_before_and_after_within_the_budget(shipped_registry, monkeypatch):
    seen = []
    effect, described, notices = knockout.corpus_view(shipped_registry, NUMBERS, "positions", None,
                                                      "synthetic: numbers", "valid", 30, seen.append)
    assert described.startswith("the first 30 pairs of synthetic: numbers") and notices == []
    assert sum(seen) == 60 and effect.after.bleu < effect.before.bleu
    json.dumps(knockout.corpus_json(effect, described))
    monkeypatch.setattr(slots, "current_budget", lambda: replace(PUBLIC_BUDGET, cpu_s=0.05))
    effect, described, notices = knockout.corpus_view(shipped_registry, NUMBERS, "scale", None, "synthetic: numbers",
                                                      "valid", 30)
    assert effect.before.n < 30 and described.startswith(f"the first {effect.before.n} pairs")
    assert notices and notices[0].startswith(f"scored on the first {effect.before.n} of the 30 sentences asked")
