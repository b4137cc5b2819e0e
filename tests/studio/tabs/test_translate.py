"""The Translate tab's callbacks (studio/tabs/translate.py): the translation with its probabilities and n-best
list, the notices it gives (the precision used, an unsure translation, an n-best list cut to the beam, bad
input), a model switch and a decoding switch, the seed box, and the sampling sliders' start."""
from __future__ import annotations

import json
import math

import gradio as gr
import plotly.graph_objects as go
import pytest

from core.bundle import ModelBundle
from core.data.tokenizer import Tokenizer
from core.inference.translation import Translation, translate_detailed
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio import app, plots
from studio.server.registry import ModelRegistry
from studio.tabs import translate
from studio.text import md
from tests.helpers.studio import SENTENCES, TRANSLATE_DEFAULTS, run_translate, studio_bundle, studio_registry


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_translate_tab_precision_says_its_path(registry, precision):
    exact = run_translate(registry, "a b c d")
    fast = run_translate(registry, "a b c d", precision)
    assert fast[0] == exact[0]
    assert f"decoded in {precision}" in fast[3] and "decoded in" not in exact[3]
    assert "decoded in" not in translate.translate(registry, "studio-tiny", "a b c d", *TRANSLATE_DEFAULTS.values(),
                                                   None)[3]


def test_translate_returns_text_probabilities_nbest_and_current(registry):
    text, plot, table, notes, current = run_translate(registry, SENTENCES[0])
    fig = go.Figure(json.loads(plot.plot))  # the JSON the page gets, read back as plotly's (validated) figure
    expected = translate_detailed(studio_bundle(), [SENTENCES[0]], translate.options("beam", 4, 0.6, 10, 3, 1, 0, 1))[0]
    assert text == expected.text and current.ids == expected.ids and current.source == SENTENCES[0]
    assert isinstance(fig, go.Figure) and len(fig.data[0].y) == len(expected.ids) + 1  # + <eos>
    body = [line for line in table.splitlines() if line.startswith("| ")][2:]  # under the header and alignment
    assert 1 <= len(body) <= 3 and body[0] == f"| 1 | {md(f'{expected.score:.4f}')} | {md(expected.text)} |"
    for method in ("greedy", "sample"):
        assert run_translate(registry, SENTENCES[1], method=method, seed=1)[4].ids


def test_the_probability_plot_marks_label_smoothings_target_for_the_right_word(registry):
    # Why does a model sure of every word stop near 0.9? Section 5.4 trained it towards 1 - eps + eps/V.
    fig = go.Figure(json.loads(run_translate(registry, SENTENCES[0])[1].plot))
    assert not fig.layout.shapes  # studio-tiny's card names no training: no line
    bundle = studio_bundle()
    smoothed = ModelBundle(bundle.model, bundle.tokenizer, {**bundle.info, "train": {"label_smoothing": 0.1}})
    ceiling = 1 - 0.1 + 0.1 / bundle.tokenizer.vocab_size
    assert translate.smoothing_ceiling(smoothed) == pytest.approx(ceiling)
    fig = plots.token_probabilities(["a", "<eos>"], [-0.2, -0.1], translate.smoothing_ceiling(smoothed))
    assert fig.layout.shapes[0].y0 == pytest.approx(ceiling) and "label smoothing" in fig.layout.annotations[0].text
    note = fig.layout.annotations[0]  # above the plot, where no bar covers it (they stand above 0.9)
    assert (note.yref, note.yanchor) == ("paper", "bottom") and note.y >= 1
    phone = fig.layout.meta["narrow"]  # on a phone the note joins the title, on a line of its own
    assert phone["annotations[0].visible"] is False and "<br>dashed: 0.90, label smoothing" in phone["title.text"]
    for eps in (0.0, "0.1", None):
        unsmoothed = ModelBundle(bundle.model, bundle.tokenizer, {"train": {"label_smoothing": eps}})
        assert translate.smoothing_ceiling(unsmoothed) is None


def test_an_empty_hypothesis_in_the_n_best_list_says_what_it_is():
    empty = Translation("a", [5], ["a"], [-0.1, -0.2], -0.3, [("a", -0.3), ("", -8.25)], ["x", "<eos>"])
    assert translate.nbest_rows(empty)[1] == [2, "-8.2500", translate.EMPTY_HYPOTHESIS]


def test_more_n_best_than_the_beam_holds_is_said(registry, toasts):
    *_, notes, _ = run_translate(registry, SENTENCES[0], beam_size=2, n_best=16)
    assert "n\\-best shown: 2, the beam size" in notes and "16 asked" in notes
    assert toasts == []  # on the page only: a toast repeating it covered the controls
    assert "n\\-best" not in run_translate(registry, SENTENCES[0], beam_size=4, n_best=4)[3]


def test_an_unsure_translation_says_so(toasts):
    """English given to the shipped De→En model comes out as fluent nonsense: a notice says the model was
    unsure and asks whether the sentence is in its source language. German gets none; nor does sampling."""
    registry = ModelRegistry()  # the shipped checkpoints

    def notes(text, method="beam"):
        return translate.translate(registry, "multi30k-de-en-small", text, method, 4, 0.6, 50, 4, 1.0, 0, 1.0, "1")[3]

    for method in ("beam", "greedy"):
        said = notes("Two children play on the beach with a ball.", method)
        assert "unsure of this translation" in said and "source language \\(de\\)" in said
        assert "unsure" not in notes("Zwei Kinder spielen am Strand mit einem Ball.", method)
    assert "unsure" not in notes("Two children play on the beach with a ball.", "sample")
    assert toasts == []


def test_the_unsure_notice_starts_below_its_threshold():
    bundle = studio_bundle()
    for p, expected in ((translate.LOW_CONFIDENCE - 0.01, 1), (translate.LOW_CONFIDENCE + 0.01, 0)):
        t = Translation("x", [5], ["x"], [math.log(p)] * 2, 0.0, [], ["<eos>"])
        assert len(translate.unsure(t, bundle)) == expected
    assert translate.unsure(Translation("", [], [], [], 0.0, [], ["<eos>"]), bundle) == []  # nothing decoded


def test_a_translation_goes_when_another_model_is_picked(registry):
    assert all(v == gr.skip() for v in translate.model_changed(registry, "studio-tiny", translate.Current()))
    current = run_translate(registry, SENTENCES[0])[4]
    registry.add("other", studio_bundle(max_len=16))
    text, fig, table, note = translate.model_changed(registry, "other", current)
    assert (text, table) == ("", "") and note == "*Another model is picked: press Translate for its translation.*"
    # The picked model's own translation stays (made before its key reached the page).
    assert all(v == gr.skip() for v in translate.model_changed(registry, "studio-tiny", current))
    registry.add("studio-tiny", studio_bundle(max_len=16))  # a new run under the same name
    assert translate.model_changed(registry, "studio-tiny", current)[3].startswith("*A new training run took")


def test_switching_the_decoding_method_translates_again(registry):
    """A beam search's n-best list stayed on screen under a greedy pick until Translate was pressed."""
    o = {**TRANSLATE_DEFAULTS, "method": "greedy"}
    rest = [o[k] for k in ("beam_size", "alpha", "max_extra", "n_best", "temperature", "top_k", "top_p", "seed")]
    current = run_translate(registry, SENTENCES[0])[4]
    text, _, table, _, now = translate.redecode(registry, current, "studio-tiny", SENTENCES[0], "greedy", *rest)
    greedy = run_translate(registry, SENTENCES[0], **o)
    assert now.options.method == "greedy" and (text, table) == (greedy[0], greedy[2])
    assert table.count("\n| 1 |") == 1 and "\n| 2 |" not in table  # greedy's one line, not the beam's list
    # Nothing shown yet, the same method, or an empty box: nothing to redo.
    for args in ((translate.Current(), SENTENCES[0], "greedy"), (current, SENTENCES[0], "beam"),
                 (current, " ", "greedy")):
        c, text, method = args
        assert all(v == gr.skip() for v in translate.redecode(registry, c, "studio-tiny", text, method, *rest))


def test_seed_box_empty_is_random_and_bad_seeds_are_named():
    assert translate.parse_seed("") is None and translate.parse_seed(None) is None
    assert translate.parse_seed(" 7 ") == 7 and translate.parse_seed(7) == 7
    assert translate.parse_seed(str(2 ** 63 - 1)) == 2 ** 63 - 1  # torch's seeds: [0, 2^63)
    for bad in ("-1", "1.5", "seven", "9" * 40, str(2 ** 63)):
        with pytest.raises(ValueError, match="seed must be"):
            translate.parse_seed(bad)
    controls = dict(beam_size=4, alpha=0.6, max_extra=50, n_best=4, temperature=0.8, top_k=0, top_p=0.9)
    with pytest.raises(ValueError, match="seed must be"):
        translate.options("sample", **controls, seed="1e3")
    assert translate.options("beam", **controls, seed="1e3").seed is None  # hidden with sampling: holds nothing up
    demo = app.build_app(studio_registry())
    box = next(b for b in demo.blocks.values() if getattr(b, "label", None) == "seed (empty: random)")
    assert box.value == ""  # a Number box would show (and send) 0: every sample the same


def test_translate_bad_input_gives_messages_not_tracebacks(registry, capsys):
    assert "Nothing to translate: type a sentence" in run_translate(registry, "   ")[3]
    notes = run_translate(registry, "Hund " * 1000)[3]  # a 5,000-character paste
    assert "truncated" in notes
    notes = run_translate(registry, "Ein Hund 🐕 läuft в снегу <script>alert(1)</script>")[3]
    assert "unknown" in notes and "<script>" not in notes and "&lt;script&gt;" in notes
    notes = run_translate(registry, SENTENCES[0], method="sample", top_p=0.0)[3]
    assert "Cannot translate" in notes and "top\\_p" in notes
    assert "no model" in translate.translate(registry, "gone", "Hund", *list(TRANSLATE_DEFAULTS.values())[:-1], None)[3]


def test_a_synthetic_tasks_model_says_its_task_over_its_examples():
    """It reads only its task's form ("forty - two"; "forty two" gave "zwei"): the examples' label says it."""
    registry = ModelRegistry()  # the shipped checkpoints
    label = translate.examples_update(registry, "numbers-en-de-tiny").label
    assert label.startswith("Examples (click one) · its task: English number 0-999, as lower-case words "
                            "('twenty - one')")
    assert translate.examples_update(registry, "multi30k-de-en-small").label == "Examples (click one)"


def test_a_beam_as_wide_as_a_tiny_vocabulary_is_said_not_raised(registry):
    tokenizer = Tokenizer.train(["a b c", "b c a"], vocab_size=64, kind="word", min_frequency=1)  # 7 entries
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    registry.add("small", ModelBundle(Transformer(config).eval(), tokenizer, {"name": "small"}))
    said = translate.translate(registry, "small", "a b", "beam", 8, 0.6, 10, 4, 1.0, 0, 1.0, "")[3]
    assert said.startswith("**Cannot translate:**") and "beam\\_size must be smaller than the vocabulary" in said


def test_sampling_starts_from_a_tempered_nucleus():
    """T = 1 with no cut-off read as nonsense on stage with the small model; the sliders start lower."""
    demo = app.build_app(studio_registry())
    labels = ("temperature", "top-p (1: off)")
    value = {b.label: b.value for b in demo.blocks.values() if getattr(b, "label", None) in labels}
    assert value == {"temperature": translate.SAMPLE_TEMPERATURE, "top-p (1: off)": translate.SAMPLE_TOP_P}
    assert translate.SAMPLE_TEMPERATURE < 1 and translate.SAMPLE_TOP_P < 1
