"""The Knock out tab's callbacks (studio/tabs/knockout.py) with the shipped models: the first view (positions
knocked out of who chases whom) says the claim and tests it; every part runs from its radio button with its
default place; a corpus before and after; a link's view set and written back; /knock_out through gradio_client."""
from __future__ import annotations

import json

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studio import app
from studio.links.address import link_of
from studio.server.registry import ModelRegistry
from studio.tabs import knockout as tab
from tests.helpers.studio import studio_registry

GERMAN, NUMBERS = "multi30k-de-en-small", "numbers-en-de-tiny"
TINY = studio_registry()


def plain(markdown: str) -> str:
    """Markdown as read: the escapes of what a user or a model wrote dropped."""
    return markdown.replace("\\", "")


@pytest.fixture(scope="module")
def shipped_registry():
    return ModelRegistry()


def test_the_first_view_says_the_claim_and_tests_it(shipped_registry):
    first, second = tab.first_sentences(shipped_registry, GERMAN)
    claim, table, verdict, probabilities, attention, why, notices, shown = tab.knock_out(
        shipped_registry, GERMAN, first, second, next(iter(tab.PART_LABELS)), None)
    assert plain(claim).startswith("**Section 3.5:** Without positions the model cannot tell word order")
    assert table.count("\n") == 4 and "A's words reversed" in table and "Two dogs chase a cat" in plain(table)
    assert verdict.startswith("**The claim holds on this model.**")
    assert [t.name for t in probabilities.data] == ["intact", "knocked out"] and len(attention.data) == 2
    assert "first encoder layer" in why and notices == ""
    assert link_of(shown) == ("?tab=knock-out&model=multi30k-de-en-small&source=Zwei+Hunde+jagen+eine+Katze."
                              "&part=positions&second=Eine+Katze+jagt+zwei+Hunde.")


def test_every_part_runs_from_its_button_with_its_default_place(shipped_registry):
    for label, part in tab.PART_LABELS.items():
        where = tab.where_update(shipped_registry, GERMAN, label, "Zwei Hunde jagen eine Katze.")
        assert where.visible == (part not in ("positions", "scale", "causal_mask"))
        claim, table, verdict, *_ , notices, shown = tab.knock_out(shipped_registry, GERMAN,
                                                                   "Zwei Hunde jagen eine Katze.", "", label,
                                                                   where.value)
        assert f"Section {tab.CLAIMS[part].section}" in claim and "| **A** |" in table and verdict, part
        assert shown.part == part and notices == ""
    unmasked = tab.knock_out(shipped_registry, GERMAN, "Zwei Hunde jagen eine Katze.", "", "causal_mask", None)
    assert "**unchanged**" in unmasked[2]
    refused = tab.knock_out(shipped_registry, GERMAN, "Zwei Hunde.", "", "layer", "decoder.9")
    assert plain(refused[6]).startswith("**Cannot knock out:** decoder.9: the decoder has layers 0..2")


def test_a_corpus_before_and_after(shipped_registry):
    figure, notes = tab.score_corpus(shipped_registry, NUMBERS, "positions", None, "synthetic: numbers", "valid", 20,
                                     lambda *a, **k: None)
    assert [t.name for t in figure.data] == ["intact", "knocked out"]
    assert plain(notes).startswith("On the first 20 pairs of synthetic: numbers") and "→" in notes
    refused = tab.score_corpus(shipped_registry, NUMBERS, "positions", None, "nowhere", "valid", 20,
                               lambda *a, **k: None)
    assert plain(refused[1]).startswith("**Cannot score:** unknown corpus")


def test_a_link_sets_the_tab(shipped_registry):
    view = tab.View(tab="knock-out", model=GERMAN, source="Ein Hund.", part="heads", where="cross.1.2")
    source, second, part, where, drawn = tab.linked(shipped_registry, view)
    assert (source, second, part, where.value, drawn) == ("Ein Hund.", "", "Heads (3.2.2)", "cross.1.2", None)
    assert tab.linked(shipped_registry, tab.View(tab="saliency")) == (gr.skip(),) * 5


def test_knock_out_through_gradio_client(shipped_registry):
    client_module = pytest.importorskip("gradio_client")
    demo = app.build_app(shipped_registry)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        client = client_module.Client(demo.local_url, verbose=False)
        answer = client.predict(GERMAN, "Zwei Hunde jagen eine Katze.", "positions", "", "", api_name="/knock_out")
        json.dumps(answer, allow_nan=False)
        assert answer["claim"]["section"] == "3.5" and answer["reversal_holds"] is True
        assert [s["sentence"] for s in answer["sentences"]] == ["A", "A's words reversed"]
        with pytest.raises(Exception, match="unknown part 'wings'"):
            client.predict(GERMAN, "Zwei Hunde.", "wings", api_name="/knock_out")
        answer = client.predict(NUMBERS, "forty two", "scale", "", "", "synthetic: numbers", "valid", 10,
                                api_name="/knock_out")
        assert answer["corpus"]["sentences"] == 10 and answer["corpus"]["before"]["bleu"] >= 0
        lens = client.predict(GERMAN, "Zwei Hunde spielen im Schnee.", api_name="/logit_lens")
        assert lens["tokens"][1] == "▁dogs" and len(lens["layers"]) == 3
        free = client.predict(GERMAN, "Zwei Hunde spielen im Schnee.", "Two dogs are playing in the snow.",
                              api_name="/free_running")
        assert free["diverges_at"] == 2 and free["said_there"] == "▁play"
        why = client.predict(GERMAN, "Zwei Hunde spielen im Schnee.", 1, "cat", api_name="/contrast")
        assert why["foil"] == "▁cat" and why["method"] == "integrated_gradients"
        calibrated = client.predict(NUMBERS, "", "synthetic: numbers", "valid", 10, api_name="/calibration")
        assert calibrated["models"][0]["model"] == NUMBERS and len(calibrated["models"][0]["bins"]["count"]) == 10
    finally:
        demo.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.text(st.characters(exclude_categories=()), max_size=120),
       second=st.text(st.characters(exclude_categories=()), max_size=60),
       part=st.sampled_from([*tab.PART_LABELS, "wings"]),
       where=st.one_of(st.none(), st.text(max_size=20),
                       st.sampled_from(["encoder.0.ffn", "cross.1", "decoder.0", "3"])))
def test_any_text_part_and_place_get_a_message_not_an_exception(first, second, part, where):
    """Issue 10's rule for this tab: the studio's tiny model, any Unicode, any part and place."""
    claim, table, verdict, probabilities, attention, why, notices, shown = tab.knock_out(
        TINY, "studio-tiny", first, second, part, where)
    assert isinstance(notices, str) and "<" not in notices and (not isinstance(table, str) or "<" not in plain(table))
