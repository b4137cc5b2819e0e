"""The Word choice tab's callbacks (studio/tabs/word_choice.py) with the shipped models: the first view (where
"dogs" is decided, where the reference and the model part, why "dogs" and not "cat"), another position's contrast,
calibration of one model, and a link's view set and written back."""
from __future__ import annotations

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studio.links.address import link_of
from studio.server.registry import ModelRegistry
from studio.tabs import word_choice as tab
from tests.helpers.studio import studio_registry

GERMAN, NUMBERS = "multi30k-de-en-small", "numbers-en-de-tiny"
TINY = studio_registry()


def plain(markdown: str) -> str:
    """Markdown as read: the escapes of what a user or a model wrote dropped."""
    return markdown.replace("\\", "")


@pytest.fixture(scope="module")
def shipped_registry():
    return ModelRegistry()


def test_the_first_view(shipped_registry):
    source, reference, foil = tab.first_pair(shipped_registry, GERMAN)
    lens, decided, exposure_plot, exposure, position, foil_box, contrast, contrasted, notices, shown = tab.look(
        shipped_registry, GERMAN, source, reference, 1, foil, *map(next, map(iter, (tab.OBJECTIVES, tab.METHODS))))
    assert decided.startswith("**Where each word is decided**") and "dogs: layer" in decided
    assert plain(exposure).startswith("**They part at token 3:** the reference says ␣are; the model wrote ␣play")
    assert position.value == 1 and position.choices[1] == ("2: ␣dogs", 1) and foil_box == "cat"
    assert plain(contrasted).startswith("At token 2: p(␣dogs) = 0.976") and "Hunde" in contrasted
    assert len(lens.data) == 1 and len(exposure_plot.data) == 2 and len(contrast.data) == 2 and notices == ""
    assert link_of(shown) == ("?tab=word-choice&model=multi30k-de-en-small&source=Zwei+Hunde+spielen+im+Schnee."
                              "&target=Two+dogs+are+playing+in+the+snow.&query=2&foil=cat")


def test_no_reference_another_position_and_refusals(shipped_registry):
    out = tab.look(shipped_registry, GERMAN, "Ein Hund läuft.", "", None, "", "logit difference", "gradient × input")
    assert out[3] == "" and out[5] and out[9].foil == out[5]  # the runner-up as the foil
    figure, line, shown = tab.contrast_again(shipped_registry, GERMAN, "Zwei Hunde spielen im Schnee.", 0, "A",
                                             "probability difference", "integrated gradients", None)
    assert plain(line).startswith("At token 1: p(␣Two)") and shown.query == 1
    assert tab.runner_up_foil(shipped_registry, GERMAN, "Zwei Hunde spielen im Schnee.", 1) != "␣dogs"
    refused = tab.look(shipped_registry, GERMAN, "", "", None, "", "probability difference", "gradient × input")
    assert plain(refused[8]).startswith("**Cannot look:** the source sentence is empty")


def test_calibration_of_one_model(shipped_registry):
    figure, table, notes = tab.calibrate(shipped_registry, NUMBERS, None, "synthetic: numbers", "valid", 20,
                                         lambda *a, **k: None)
    assert figure.data[0].name.startswith(f"{NUMBERS}: ECE") and "| numbers-en-de-tiny |" in plain(table)
    assert plain(notes).startswith("- On the first 20 pairs of synthetic: numbers")
    refused = tab.calibrate(shipped_registry, NUMBERS, GERMAN, "synthetic: numbers", "valid", 20, lambda *a, **k: None)
    assert plain(refused[2]).startswith("**Cannot measure:**") and "different language pairs" in refused[2]


def test_a_link_sets_the_tab():
    view = tab.View(tab="word-choice", source="Ein Hund.", target="A dog.", query=2, foil="cat")
    source, reference, position, foil, drawn = tab.linked(view)
    assert (source, reference, position.value, foil, drawn) == ("Ein Hund.", "A dog.", 1, "cat", None)
    assert tab.linked(None) == (gr.skip(),) * 5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.text(st.characters(exclude_categories=()), max_size=120),
       reference=st.text(st.characters(exclude_categories=()), max_size=60),
       position=st.one_of(st.none(), st.integers(-3, 40)),
       foil=st.text(st.characters(exclude_categories=()), max_size=12))
def test_any_text_position_and_foil_get_a_message_not_an_exception(source, reference, position, foil):
    """Issue 10's rule for this tab: the studio's tiny model, any Unicode, any position and foil."""
    out = tab.look(TINY, "studio-tiny", source, reference, position, foil, "probability difference",
                   "integrated gradients")
    assert isinstance(out[8], str) and "<" not in out[8]
    assert all("<" not in plain(s) for s in (out[1], out[3], out[7]) if isinstance(s, str))
