"""The Attention tab's callbacks (studio/tabs/attention.py): maps of every layer and head, a long source's
truncation, bertviz's views offline and escaped, head ablation on a private copy and on the weights that
translated, drawn only on screen and once a sentence, never outliving a model switch, its own sentence."""
from __future__ import annotations

import contextlib
import copy
import html
import re

import gradio as gr
import numpy as np
import pytest
import torch

from core.bundle import ModelBundle
from core.explain.hooks import attention_modules, heads_off
from core.inference.translation import translate_detailed
from core.model.transformer import Transformer
from studio import app, plots
from studio.tabs import attention, translate
from studio.text import md
from tests.helpers.studio import SENTENCES, run_translate, studio_bundle


@pytest.fixture
def current(registry):
    return run_translate(registry, SENTENCES[1])[4]


def test_attention_maps_cover_every_layer_and_head(registry, current):
    analysis, title, layer, head = attention.show(registry, current)
    c = studio_bundle().model.config
    s, t = len(analysis.src_tokens), len(analysis.dec_tokens)
    assert analysis.maps["encoder"].shape == (c.encoder_layers, c.n_heads, s, s)
    assert analysis.maps["decoder"].shape == (c.decoder_layers, c.n_heads, t, t)
    assert analysis.maps["cross"].shape == (c.decoder_layers, c.n_heads, t, s)
    assert torch.allclose(torch.from_numpy(analysis.maps["cross"].sum(-1)), torch.ones(1))
    for label, stack in attention.STACKS.items():
        q, k = analysis.maps[stack].shape[2:]
        grid, big = attention.figures(analysis, label, False, 2, 3)
        assert grid.data[0].z.shape == (c.encoder_layers * (q + 1) - 1, c.n_heads * (k + 1) - 1)  # blocks + gaps
        assert [a.text for a in grid.layout.annotations[:4]] == ["H1", "H2", "H3", "H4"]  # above the blocks
        # Each block's keys under it (one in k where more would crowd: the Download menu lists them all), <eos>
        # too, escaped (plotly reads text as HTML).
        keys = [text for _, text in grid.layout.meta["labels"]["xaxis"]]
        assert len(keys) == c.n_heads * k and set(grid.layout.xaxis.ticktext) <= set(keys)  # short words, no ▁
        assert stack == "decoder" or list(grid.layout.xaxis.ticktext).count("&lt;eos&gt;") == c.n_heads
        assert "layer 2, head 3" in big.layout.title.text and big.data[0].z.shape == (q, k)
        grid, big = attention.figures(analysis, label, True, 9, 9)  # out-of-range sliders are clamped
        assert grid.data[0].z.shape[1] == k and "layer 2, mean" in big.layout.title.text
        grid, big = attention.figures(analysis, label, False, 2, c.n_heads + 1)  # a head past the last: the last
        assert f"layer 2, head {c.n_heads}" in big.layout.title.text
    assert attention.show(registry, translate.Current())[0] is None


def test_a_long_source_shows_its_truncation_and_labels_one_token_in_k(registry):
    current = run_translate(registry, " ".join(SENTENCES * 5))[4]
    assert "source truncated" in attention.show(registry, current)[1]  # the maps show only what the model read
    keys = [f"t{i}" for i in range(255)]
    big = plots.attention_head(np.zeros((3, 255)), ["a", "b", "c"], keys, "title", "query", "key")
    assert list(big.layout.xaxis.tickvals) == list(range(0, 255, 8)) and big.layout.xaxis.ticktext[1] == "t8"
    assert big.layout.xaxis.title.text == "key (one in 8 labelled)"  # 32 slanted labels: room in presenter type
    assert list(big.layout.yaxis.tickvals) == [0, 1, 2] and big.layout.yaxis.title.text == "query"


def test_bertviz_views_are_offline_and_escaped(registry):
    current = run_translate(registry, "</script><img src=x onerror=alert(1)> Hund")[4]
    analysis = attention.show(registry, current)[0]
    analysis.src_tokens[0] = "</script><b>x"
    head_html, model_html = attention.bertviz_views(analysis)
    for view in (head_html, model_html):
        assert view.startswith('<iframe class="bertviz" sandbox="allow-scripts"')
        page = html.unescape(re.search(r'srcdoc="([^"]*)"', view).group(1))
        assert "cdnjs" not in page and "https://" not in re.sub(r"//[^\n]*|/\*.*?\*/", "", page, flags=re.S)
        assert "BSD-3-Clause" in page and "jQuery v" in page and "window.require" in page
        assert "</script><b>x" not in page and "<\\/script><b>x" in page


def test_head_ablation_switches_heads_off_only_on_the_copy(registry, current):
    groups = attention.head_choices(registry, "studio-tiny")
    assert "L1 H3" in [c[0] for c in groups[2].choices]
    assert "heads-4" in groups[0].elem_classes  # a row per layer; on a phone, rows of 2 heads, 6 heads 3 a row
    assert all(f".heads-{n} {{ --heads: {n}; --heads-narrow: {k}; }}" in app.CSS for n, k in ((4, 2), (6, 3), (5, 1)))
    assert attention.parse_heads([], ["L2 H1"], ["L1 H3", "L1 H4"]) == {"decoder": {1: [0]}, "cross": {0: [2, 3]}}
    assert list(attention.parse_heads([], [], ["L2 H2", "L1 H4", "L2 H1"])["cross"].items()) == [(0, [3]), (1, [0, 1])]
    assert "Tick one" in attention.ablate(registry, current, "studio-tiny", [], [], [])
    # The verdict is what the model says with those heads off, computed here on a copy of it: every
    # cross-attention head off changes this model's translation, the first encoder layer's do not.
    bundle = registry.get("studio-tiny")
    every = [0, 1, 2, 3]
    for encoder, cross, spec, verdict in (
            (["L1 H1", "L1 H2", "L1 H3", "L1 H4"], [], {"encoder": {0: every}}, "unchanged"),
            ([], [f"L{li} H{h}" for li in (1, 2) for h in (1, 2, 3, 4)], {"cross": {0: every, 1: every}}, "changed")):
        twin = copy.deepcopy(bundle.model)
        with heads_off(twin, spec):
            after = translate_detailed(ModelBundle(twin, bundle.tokenizer, bundle.info), [current.source],
                                       current.options)[0].text
        assert (after == bundle.tokenizer.decode(current.ids)) == (verdict == "unchanged")
        report = attention.ablate(registry, current, "studio-tiny", encoder, [], cross)
        assert f"the translation is {verdict}" in report and all(w in report for w in md(after).split())
    config = registry.get("studio-tiny").model.config  # a stack's or layer's every head: named as such
    every_cross = [f"L{li + 1} H{h + 1}" for li in range(config.decoder_layers) for h in range(config.n_heads)]
    assert attention.heads_named(attention.parse_heads([], [], every_cross), config) == (
        f"all {len(every_cross)} cross-attention heads")
    assert attention.heads_named(attention.parse_heads([], ["L1 H2"], []), config) == "decoder self-attention L1 H2"
    for module in attention_modules(registry.get("studio-tiny").model)["encoder"]:
        assert module.head_mask is None
    assert run_translate(registry, SENTENCES[1])[4].ids == current.ids
    assert attention.bold_changes("a b c", "a <b> c") == "a **&lt;b&gt;** c"


def test_attention_and_ablation_read_the_weights_that_translated(registry, current, monkeypatch):
    """A training run's next snapshot keeps its registry key: the maps were drawn, and the heads switched
    off, on the newer weights, so 'changed' mixed training progress with the ablation."""
    bundle = studio_bundle()
    torch.manual_seed(123)
    newer = ModelBundle(Transformer(bundle.model.config).eval(), bundle.tokenizer, bundle.info)
    registry.add("studio-tiny", newer, same_model=True)  # as TrainingJob._publish does
    analysis = attention.show(registry, current)[0]
    assert analysis.translation == bundle.tokenizer.decode(current.ids)
    again = attention.analyse(current.bundle, "studio-tiny", current.source, current.ids)
    assert all(np.array_equal(analysis.maps[k], again.maps[k]) for k in again.maps)
    model, _ = registry.ablation_model("studio-tiny", current.bundle)
    assert torch.equal(model.generator.weight, current.bundle.model.generator.weight)
    assert not torch.equal(model.generator.weight, newer.model.generator.weight)
    monkeypatch.setattr(attention, "knocked_out", contextlib.contextmanager(lambda model, **parts: (yield)))
    assert "is unchanged" in attention.ablate(registry, current, "studio-tiny", [], [], ["L1 H1"])  # none off really


def test_attention_is_drawn_only_on_screen_and_once_per_sentence(registry, current):
    skipped = attention.refresh(registry, current, None, "translate", "studio-tiny")
    assert all(isinstance(v, type(gr.skip())) for v in skipped)  # nobody looks: no forward pass
    analysis, title, layer, head, drawn = attention.refresh(registry, current, None, attention.TAB_ID, "studio-tiny")
    assert drawn == (current, registry.key("studio-tiny"))
    assert analysis.source == current.source and "Translation" in title
    assert all(isinstance(v, type(gr.skip())) for v in attention.refresh(registry, current, drawn, attention.TAB_ID,
                                                                         "studio-tiny"))
    assert all(isinstance(v, type(gr.skip())) for v in attention.redraw(analysis, "Encoder self-attention",
                                                                        False, 1, 1, "beam"))
    cross, encoder = attention.FIRST_STACK, "Encoder self-attention"
    assert all(isinstance(v, type(gr.skip())) for v in attention.refresh_bertviz(analysis, cross, None,
                                                                                 attention.TAB_ID, False))  # folded
    head_html, model_html, key = attention.refresh_bertviz(analysis, cross, None, attention.TAB_ID, True)
    assert head_html.startswith("<iframe") and key == (analysis.model, analysis.source, analysis.translation, cross)
    assert all(isinstance(v, type(gr.skip())) for v in attention.refresh_bertviz(analysis, cross, key,
                                                                                 attention.TAB_ID, True))
    # Another stack on the radio: bertviz is written again, open on that stack
    head_html, _, key = attention.refresh_bertviz(analysis, encoder, key, attention.TAB_ID, True)
    assert key[-1] == encoder and '"default_filter": "0"' in html.unescape(head_html)


def test_attention_maps_never_outlive_a_model_switch(registry, current):
    registry.add("other", studio_bundle(max_len=16))
    analysis, title, *_, drawn = attention.refresh(registry, current, None, attention.TAB_ID, "studio-tiny")
    assert "**Model:** studio\\-tiny" in title
    assert all(fig.layout.title.text.startswith("studio-tiny · ") for fig in attention.figures(
        analysis, "Encoder self-attention", False, 1, 1))  # each map names its model
    # Another model picked (here or on another tab): the maps go, with a note, and come back for the model
    # the sentence was translated with; never the old model's maps beside the new one's sliders and boxes.
    analysis, title, layer, head, drawn = attention.refresh(registry, current, drawn, attention.TAB_ID, "other")
    assert analysis is None and "Model changed to **other**" in title and "translate again" in title
    assert (layer, head) == (gr.skip(), gr.skip())  # picked_model_ranges sets them for "other"
    assert attention.refresh_bertviz(None, attention.FIRST_STACK, ("studio-tiny", "x", "y", attention.FIRST_STACK),
                                     attention.TAB_ID, True)[:2] == (attention.NO_BERTVIZ,) * 2  # said, not blank
    assert "Model changed to **other**" in attention.ablate(registry, current, "other", ["L1 H1"], [], [])
    analysis, *_, drawn = attention.refresh(registry, current, drawn, attention.TAB_ID, "studio-tiny")
    assert analysis.model == "studio-tiny" and drawn == (current, registry.key("studio-tiny"))
    mine, _ = attention.translate_here(registry, "other", SENTENCES[0])
    assert attention.refresh(registry, mine, drawn, attention.TAB_ID, "other")[0].model == "other"


def test_attention_tab_translates_its_own_sentence(registry):
    current, notes = attention.translate_here(registry, "studio-tiny", SENTENCES[2])
    assert current.source == SENTENCES[2] and current.model == "studio-tiny" and "unknown" not in notes
    kept, said = attention.translate_here(registry, "studio-tiny", "  ")  # the maps on screen stay
    assert kept == gr.skip() and "Type a sentence" in said  # said under the box: a toast covered the plots
    assert "unknown pieces" in attention.translate_here(registry, "studio-tiny", "ein 猫")[1]
