"""Deep links (issue 53, studio/links/address.py): a view's address read back clamped and with notices, never an
error; every tab of the page has its label as its slug."""
from __future__ import annotations

from studio.links.address import TABS, Shape, View, link_of, read_link
from studio.server.registry import ModelRegistry
from tests.helpers.studio import link_params

MODELS = ModelRegistry().names()  # what the shipped checkpoints offer
SMALL = Shape(encoder_layers=3, decoder_layers=3, heads=4)


def test_a_link_names_a_view_and_reads_back_the_same():
    view = View(tab="attention", model="multi30k-de-en-small", source="Zwei Hunde spielen im Schnee.",
                stack="cross", layer=2, head=3, presenter=True)
    link = link_of(view)
    assert link.startswith("?tab=attention&model=multi30k-de-en-small&source=Zwei+Hunde") and "presenter=1" in link
    assert read_link(link_params(link), MODELS, lambda name: SMALL) == view


def test_out_of_range_values_are_clamped_and_unknown_ones_ignored_with_notices():
    view = read_link({"tab": "attention", "model": "multi30k-de-en-small", "layer": "1e300", "head": "9",
                      "beam": "0", "alpha": "nan", "stack": "sideways", "colour": "red", "tab2": "x" * 500},
                     MODELS, lambda name: SMALL)
    assert (view.tab, view.layer, view.head, view.beam, view.alpha, view.stack) == ("attention", 3, 4, 1, None, None)
    said = " | ".join(view.notices)
    assert "layer 10000 clamped to 3: multi30k-de-en-small has 3" in said and "head 9 clamped to 4" in said
    assert "beam '0' clamped to 1" in said and "ignored alpha='nan': not a number" in said
    assert "ignored stack='sideways'" in said and "ignored colour='red'" in said
    assert all(len(notice) < 300 for notice in view.notices)  # a hostile value is quoted short


def test_an_unknown_model_or_tab_leaves_the_defaults():
    view = read_link({"tab": "nope", "model": "gpt-5", "source": "x" * 900}, MODELS)
    assert (view.tab, view.model, len(view.source)) == ("translate", None, 500) and len(view.notices) == 3


def test_every_tab_of_the_app_has_its_label_as_slug():
    """The issue's rule: the tab's label in lower case, spaces as hyphens; no slug without a tab."""
    import gradio as gr

    from studio.app import build_app
    labels = [b.label for b in build_app(ModelRegistry(None)).blocks.values()
              if isinstance(b, gr.Tab) and (b.elem_id or "").startswith("tab-")]  # the page's tabs, not a tab's own
    assert sorted(label.lower().replace(" ", "-") for label in labels) == sorted(TABS)


def test_gradios_own_parameters_pass_and_a_flood_of_unknown_ones_is_said_in_a_few_lines():
    flood = {"k" * 90 + str(i): "v" for i in range(30)}
    view = read_link({"__theme": "dark", "view": "api", "deep_link": "x", **flood}, MODELS)
    assert len(view.notices) == 8 and view.notices[-1] == "… and 23 more ignored or changed"
    assert all(len(notice) < 300 for notice in view.notices) and "__theme" not in " ".join(view.notices)


def test_a_tab_a_link_is_setting_keeps_its_pending_mark_when_the_model_is_offered():
    """The page load offers the model (its key changes) while the link sets the Knock out or Word choice tab: the
    draw that change starts must wait for the link's (it would draw the tab's first sentences over the link's)."""
    import gradio as gr

    from studio.links.address import LINK_PENDING, forget_drawn
    from studio.tabs import knockout, word_choice

    assert forget_drawn(LINK_PENDING) == LINK_PENDING
    assert forget_drawn(("multi30k-de-en-small", 1)) is None  # another model: drawn afresh
    for tab in (knockout, word_choice):
        skipped = tab.draw_if_new(None, tab.TAB_ID, LINK_PENDING, ("multi30k-de-en-small", 1))
        assert skipped and all(value == gr.skip() for value in skipped)
