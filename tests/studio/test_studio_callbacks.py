"""The studio's callbacks, called directly from Python (no browser): shell, Translate,
Attention, Positional encoding and Model tabs, bad input, escaping."""
from __future__ import annotations

import contextlib
import copy
import html
import json
import math
import re
import zipfile

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from plotly.subplots import make_subplots

from core.bundle import ModelBundle
from core.checkpoint import save_checkpoint
from core.data.tokenizer import Tokenizer
from core.explain.hooks import attention_modules, heads_off
from core.inference.translation import Translation, translate_detailed
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio import app, plots, shell
from studio.components import Slider
from studio.plots import bertviz_offline
from studio.server.guard import guard
from studio.server.registry import ModelRegistry
from studio.server.uploads import UPLOAD_EXPECTED, open_checkpoint
from studio.tabs import attention, model_view, positional, translate
from studio.text import info, md, md_table, warn
from tests.helpers.studio import SENTENCES, studio_bundle, studio_registry, toasts  # noqa: F401 (a fixture)

DEFAULTS = dict(method="beam", beam_size=4, alpha=0.6, max_extra=10, n_best=3, temperature=1.0, top_k=0,
                top_p=1.0, seed=None)


def run_translate(registry, text, precision="fp32", **changes):
    o = {**DEFAULTS, **changes}
    return translate.translate(registry, "studio-tiny", text, o["method"], o["beam_size"], o["alpha"],
                               o["max_extra"], o["n_best"], o["temperature"], o["top_k"], o["top_p"], o["seed"],
                               precision)


@pytest.fixture
def registry():
    return studio_registry()


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_translate_tab_precision_says_its_path(registry, precision):
    exact = run_translate(registry, "a b c d")
    fast = run_translate(registry, "a b c d", precision)
    assert fast[0] == exact[0]
    assert f"decoded in {precision}" in fast[3] and "decoded in" not in exact[3]
    assert "decoded in" not in translate.translate(registry, "studio-tiny", "a b c d", *DEFAULTS.values(), None)[3]


# ----- shell and registry ----------------------------------------------------------------------
def test_cli_defaults_are_local_and_private():
    args = app.parse_args([])
    assert (args.host, args.port, args.share, args.checkpoint) == ("127.0.0.1", 7860, False, None)


def test_the_shipped_lesson_is_presented_unless_no_lesson_is_asked_for():
    assert app.parse_args([]).lesson == app.LESSON and app.LESSON.is_file()
    assert app.parse_args(["--no-lesson"]).lesson is None
    def panels(lesson) -> list[str]:
        return [b.label for b in app.build_app(ModelRegistry(None), lesson=lesson).blocks.values()
                if isinstance(b, gr.Accordion) and (b.label or "").startswith("Lesson: ")]
    assert len(panels(app.read_lesson(app.LESSON))) == 1 and panels(None) == []


def test_cli_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(SystemExit, match="is not a checkpoint: missing"):
        app.main(["--checkpoint", str(tmp_path)])


def test_status_line_names_model_parameters_vocab_device(registry):
    line = shell.status_line(registry, "studio-tiny")
    bundle = studio_bundle()
    assert "studio\\-tiny" in line and f"{bundle.model.num_parameters():,}" in line and "cpu" in line
    assert "No model yet" in shell.status_line(ModelRegistry(None), None)
    assert "cannot be used" in shell.status_line(registry, "missing")


def test_registry_scans_checkpoint_folders_and_loads_lazily(tmp_path):
    save_checkpoint(tmp_path / "tiny-a", studio_bundle())
    (tmp_path / "not-a-checkpoint").mkdir()
    registry = ModelRegistry(tmp_path)
    assert registry.names() == ["tiny-a"]
    assert registry.get("tiny-a").model.num_parameters() == studio_bundle().model.num_parameters()
    registry.add("trained here", studio_bundle())
    assert registry.names() == ["tiny-a", "trained here"]
    with pytest.raises(LookupError):
        registry.get("nope")


def test_ablation_runs_on_a_private_copy(registry):
    model, lock = registry.ablation_model("studio-tiny")
    original = registry.get("studio-tiny").model
    assert model is not original and registry.ablation_model("studio-tiny")[0] is model
    assert model.generator.weight is model.tgt_embed.weight  # tying survives the copy
    assert torch.equal(model.generator.weight, original.generator.weight)


def test_opening_a_file_that_is_not_a_checkpoint_warns_and_keeps_serving(registry, tmp_path, toasts):
    """The message names the upload by its own name (never the server's copies) and says what the
    studio takes."""
    uploads = tmp_path / "gradio" / "0123abcd"  # where Gradio keeps an upload, under its original name
    uploads.mkdir(parents=True)
    folder = save_checkpoint(tmp_path / "shipped", studio_bundle())
    for name, data in (("model.bin", b"\x00not a model"), ("fake.zip", b"PK not really"),
                       ("config.json", (folder / "config.json").read_bytes())):
        (uploads / name).write_bytes(data)
    with zipfile.ZipFile(uploads / "notes.zip", "w") as z:
        z.writestr("notes/readme.md", "no checkpoint here")
    (folder / "model.safetensors").write_bytes(b"\x00not weights")
    damaged = uploads / "damaged.zip"
    with zipfile.ZipFile(damaged, "w") as z:
        for p in folder.iterdir():
            z.write(p, f"shipped/{p.name}")
    expected = UPLOAD_EXPECTED
    for files, message in (
            (["model.bin"], f"Cannot open model.bin: it is not a .zip. {expected}"),
            (["fake.zip"], f"Cannot open fake.zip: it is not a readable .zip archive. {expected}"),
            (["notes.zip"], "Cannot open notes.zip: config.json, model.safetensors and tokenizer.json are missing. "
                            + expected),
            (["config.json", "model.bin"], "Cannot open config.json, model.bin: model.safetensors and tokenizer.json "
                                           f"are missing. {expected}")):
        picker, status = open_checkpoint(registry, [str(uploads / f) for f in files], "studio-tiny")
        assert toasts[-1] == html.escape(message, quote=False)
        assert registry.names() == ["studio-tiny"] and picker.value == "studio-tiny" and "studio\\-tiny" in status
    open_checkpoint(registry, [str(damaged)], "studio-tiny")  # core's message, without the server's path
    assert toasts[-1].startswith("Cannot open damaged.zip: model.safetensors: not a readable safetensors file")
    assert "/tmp" not in toasts[-1] and str(tmp_path) not in " ".join(toasts) and registry.names() == ["studio-tiny"]
    assert expected == ("The studio opens a .zip of a checkpoint folder, or the checkpoint's files uploaded together: "
                        "config.json, model.safetensors and tokenizer.json.")


def _with_zip_headers(zip_bytes: bytes, local: int, central: int, change) -> bytes:
    """zip_bytes with change(data, offset) applied at each local and central file header's field."""
    data = bytearray(zip_bytes)
    for signature, at in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            change(data, start + at)
            start += 4
    return bytes(data)


def test_a_zip_that_python_cannot_unpack_is_named_not_raised(registry, tmp_path, toasts):
    """An encrypted member (RuntimeError) or Windows' Deflate64 (NotImplementedError) fell through to the
    generic 'Something went wrong' toast."""
    folder = save_checkpoint(tmp_path / "ck", studio_bundle())
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as z:
        for p in sorted(folder.iterdir()):
            z.write(p, f"ck/{p.name}")

    def encrypted(data, at):  # general-purpose flag bit 0
        data[at] |= 1

    def deflate64(data, at):  # compression method 9
        data[at:at + 2] = (9).to_bytes(2, "little")

    for name, (local, central, change), said in (
            ("locked.zip", (6, 8, encrypted), "is encrypted; zip the folder again without a password"),
            ("d64.zip", (8, 10, deflate64), "is compressed with a method the studio cannot read")):
        (tmp_path / name).write_bytes(_with_zip_headers(plain.read_bytes(), local, central, change))
        guard(open_checkpoint)(registry, [str(tmp_path / name)], "studio-tiny")
        assert toasts[-1].startswith(f"Cannot open {name}: config.json in the .zip {said}")
    assert registry.names() == ["studio-tiny"]


def test_opening_uploaded_checkpoint_files_and_a_zip(registry, tmp_path, toasts):
    same = save_checkpoint(tmp_path / "same", studio_bundle())  # the model offered as studio-tiny
    picker, _ = open_checkpoint(registry, [str(p) for p in sorted(same.iterdir())], "other")
    assert picker.value == "studio-tiny" and registry.names() == ["studio-tiny"]  # picked, not offered twice
    assert toasts[-1] == "studio-tiny is open already (the same weights): it is picked."
    folder = save_checkpoint(tmp_path / "shipped", studio_bundle(max_len=16))  # another model, the same name
    files = [str(p) for p in sorted(folder.iterdir())]
    picker, status = open_checkpoint(registry, files, "studio-tiny")
    assert picker.value == "studio-tiny (2)" and "studio\\-tiny \\(2\\)" in status
    assert ("studio-tiny (2) (uploaded)", "studio-tiny (2)") in picker.choices  # gone when the studio stops
    archive = tmp_path / "shipped.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for p in folder.iterdir():
            z.write(p, f"shipped/{p.name}")
    picker, _ = open_checkpoint(registry, [str(archive)], "studio-tiny")
    assert picker.value == "studio-tiny (2)" and len(registry.names()) == 2  # its .zip: the same model again


def test_a_same_named_checkpoint_that_no_longer_loads_does_not_block_an_upload(tmp_path):
    shelf = tmp_path / "checkpoints"
    save_checkpoint(shelf / "studio-tiny", studio_bundle())
    (shelf / "studio-tiny" / "model.safetensors").write_bytes(b"damaged since the app started")
    registry = ModelRegistry(shelf)
    upload = save_checkpoint(tmp_path / "upload", studio_bundle())
    picker, _ = open_checkpoint(registry, [str(p) for p in sorted(upload.iterdir())], None)
    assert picker.value == "studio-tiny (2)"


def test_the_tabs_redraw_on_the_picked_models_registry_key_not_its_name():
    """A new training run under the picked name changes shell.model_key but not the picker's value
    (whose .change would not fire): whatever shows the picked model listens to the key."""
    def name(fn) -> str:  # guard(partial(f, ...)) -> "f"
        inner = getattr(fn.fn, "__wrapped__", fn.fn)
        return getattr(inner, "func", inner).__name__

    demo = app.build_app(studio_registry())
    picker = next(b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and b.label == "Model")
    fns = list(demo.fns.values())
    on_picker = {name(fn): fn for fn in fns if (picker._id, "change") in fn.targets}
    assert set(on_picker) == {"key", "picked"}  # the key itself; the Train tab fetching newer weights
    key = on_picker["key"].outputs[0]
    on_key = {name(fn) for fn in fns if (key._id, "change") in fn.targets}
    assert on_key == {"status_line", "defaults", "head_choices", "picked_model_ranges", "example_choices",
                      "examples_update", "model_changed", "settings_changed", "model_width", "learned_view", "refresh",
                      "model_choices", "<lambda>"}
    # <lambda>: the Attention tab's redraw; refresh: Attention arithmetic's and Saliency's; model_choices: Compare's
    # model A; learned_view: the Positional encoding tab's learned positions
    train_view = next(fn for fn in fns if fn.api_name == "train_view")
    assert train_view.outputs[-1] is key and train_view.inputs[-2] is key  # a run under the picked name


def test_app_builds_with_every_tab_and_no_model():
    for registry in (studio_registry(), ModelRegistry(None)):
        demo = app.build_app(registry)
        labels = {b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)}
        assert {"Translate", "What if", "Beam search", "Attention", "Attention arithmetic", "Saliency",
                "Positional encoding", "Model", "Compare"} <= labels


# ----- Translate ----------------------------------------------------------------------------------
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


def test_the_sinusoids_legend_names_fit_two_a_row_on_a_phone():
    table = np.zeros((10, 128))
    fig = plots.pe_curves(table, [0, 1, 64], (np.arange(10.0), table))
    named = [t.name for t in fig.data if t.showlegend is not False]
    assert named == ["dim 0 (sin)", "dim 1 (cos)", "dim 64 (sin)"]
    phone = fig.layout.meta["narrow"]
    assert [phone[f"data[{i}].name"] for i in (0, 2, 4)] == ["dim 0 sin", "dim 1 cos", "dim 64 sin"]
    assert phone["legend.entrywidth"] < 0.5  # 0.5 and a gap left one entry a row


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
    o = {**DEFAULTS, "method": "greedy"}
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
    assert "no model" in translate.translate(registry, "gone", "Hund", *list(DEFAULTS.values())[:-1], None)[3]


def test_examples_come_from_the_model_or_german_for_de_en():
    assert shell.examples_for(studio_bundle()) == SENTENCES
    bundle = studio_bundle()
    de_en = type(bundle)(bundle.model, bundle.tokenizer, {"name": "multi30k-de-en-small"})
    assert shell.examples_for(de_en) == shell.GERMAN_EXAMPLES
    assert shell.examples_for(type(bundle)(bundle.model, bundle.tokenizer, {"name": "x"})) == []


def test_a_synthetic_tasks_model_says_its_task_over_its_examples():
    """It reads only its task's form ("forty - two"; "forty two" gave "zwei"): the examples' label says it."""
    registry = ModelRegistry()  # the shipped checkpoints
    label = translate.examples_update(registry, "numbers-en-de-tiny").label
    assert label.startswith("Examples (click one) · its task: English number 0-999, as lower-case words "
                            "('twenty - one')")
    assert translate.examples_update(registry, "multi30k-de-en-small").label == "Examples (click one)"


# ----- Attention ----------------------------------------------------------------------------------
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


def test_attention_grid_names_tokens_on_hover_unless_that_would_swamp_the_page():
    heads = ["H1", "H2", "H3", "H4"]
    letters = list("abcdefghijklmnopqrst")
    small = plots.attention_grid(np.random.rand(3, 4, 20, 20), letters, letters, "t", heads)
    assert small.data[0].customdata[0][0] == "L1 H1: a → a" and "customdata" in small.data[0].hovertemplate
    tokens = [f"t{i}" for i in range(256)]
    long = plots.attention_grid(np.random.rand(3, 4, 256, 256), tokens, tokens, "t", heads)
    assert long.data[0].customdata is None and len(long.to_json()) < 8e6  # was 28 MB with a label per cell


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
    monkeypatch.setattr(attention, "heads_off", contextlib.contextmanager(lambda model, heads: (yield)))
    assert "is unchanged" in attention.ablate(registry, current, "studio-tiny", [], [], ["L1 H1"])  # none off really


def test_a_beam_as_wide_as_a_tiny_vocabulary_is_said_not_raised(registry):
    tokenizer = Tokenizer.train(["a b c", "b c a"], vocab_size=64, kind="word", min_frequency=1)  # 7 entries
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    registry.add("small", ModelBundle(Transformer(config).eval(), tokenizer, {"name": "small"}))
    said = translate.translate(registry, "small", "a b", "beam", 8, 0.6, 10, 4, 1.0, 0, 1.0, "")[3]
    assert said.startswith("**Cannot translate:**") and "beam\\_size must be smaller than the vocabulary" in said


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


# ----- Positional encoding and Model tabs ------------------------------------------------------------
def test_positional_plots_follow_d_model_and_length():
    heatmap, curves, similarity = positional.render(65, 30, [0, 1, 200])
    assert heatmap.data[0].z.shape == (30, 64)  # d_model rounded down to even
    named = [t for t in curves.data if t.showlegend is not False]
    assert [t.name for t in named] == ["dim 0 (sin)", "dim 1 (cos)"]
    # Each drawn as the sinusoid it is, between the whole positions (dim 0's 2π read as a zig-zag joined
    # from one to the next), with the whole positions' values, what the model adds, as dots on it.
    smooth, dots = curves.data[0], curves.data[1]
    assert len(smooth.x) == 8 * 29 + 1 and np.allclose(smooth.y, np.sin(smooth.x))
    assert list(dots.x) == list(range(30)) and np.allclose(dots.y, heatmap.data[0].z[:, 0], atol=1e-6)
    assert similarity.data[0].z.shape == (30, 30)
    assert positional.dimension_choices(16, [0, 20], picked=True).value == [0]  # the user's, where they exist
    assert positional.default_dims(128) == [0, 1, 16, 32]
    assert positional.dimension_choices(512, [0, 1, 16, 32], picked=False).value == [0, 1, 64, 128]  # same waves


def test_positional_plots_say_d_model_was_rounded_and_tick_whole_positions():
    heatmap, curves, similarity = positional.render(13, 2, [0, 1])
    assert heatmap.data[0].z.shape == (2, 12) and "d_model 13 rounded down to even" in heatmap.layout.title.text
    assert "rounded" not in positional.render(12, 2, [0])[0].layout.title.text
    assert [t.name for t in positional.render(12, 2, [12])[1].data if t.showlegend is not False] == [
        "dim 0 (sin)", "dim 1 (cos)"]  # 12: none
    # Two positions: plotly would tick 0, 0.5, 1; one tick per position instead (plenty: its own choice).
    for axis in (heatmap.layout.yaxis, curves.layout.xaxis, similarity.layout.xaxis, similarity.layout.yaxis):
        assert axis.dtick == 1 and axis.title.text == "position"
    assert positional.render(12, 60, [0])[1].layout.xaxis.dtick is None


def test_the_positional_tab_starts_at_the_picked_models_d_model(registry):
    width, dims = positional.model_width(registry, "studio-tiny", [0, 1], False)
    assert width == registry.get("studio-tiny").model.config.d_model and dims.value == positional.default_dims(width)
    assert positional.model_width(registry, "no-such-model", [0, 1], False) == (gr.skip(), gr.skip())


def test_a_new_d_model_is_drawn_after_its_dimensions_are_offered():
    demo = app.build_app(studio_registry())
    d_model = next(i for i, b in demo.blocks.items() if isinstance(b, Slider) and b.label == "d_model")
    fns = {i: (getattr(f.fn, "__name__", ""), f) for i, f in demo.fns.items()}
    # Drawn beside dimension_choices, render got the old dimensions, which Gradio refused against the new
    # choices ("Value: 16 is not in the list of choices" for a d_model of 12).
    assert not any(name == "render" and (d_model, "input") in f.targets for name, f in fns.values())
    offered = next(i for i, (name, f) in fns.items() if name == "dimension_choices")
    assert any(name == "render" and f.trigger_after == offered for name, f in fns.values())


def test_model_tab_counts_every_parameter_once(registry):
    bundle = studio_bundle()
    assert sum(n for _, n, _ in model_view.parameter_rows(bundle)) == bundle.model.num_parameters()
    summary, shares, table, lr, schedule, smoothing, masks = model_view.render(registry, "studio-tiny", 4000, 20000,
                                                                               0.1)
    assert sum(shares.data[0].x) == bundle.model.num_parameters()  # every parameter in one bar or another
    assert set(shares.data[0].y) == {"Embeddings", "Encoder self-attention", "Encoder feed-forward", "LayerNorms",
                                     "Decoder masked self-attention", "Decoder cross-attention", "Decoder feed-forward"}
    assert f"**{bundle.model.num_parameters():,} parameters**" in summary
    assert "Total" in table and f"{bundle.model.num_parameters():,}" in table
    peak = max(lr.data[0].y)
    assert peak == pytest.approx(64 ** -0.5 * 4000 ** -0.5, rel=0.01)
    assert max(smoothing.data[0].y) == pytest.approx(0.9 + 0.1 / bundle.model.config.tgt_vocab_size)
    assert smoothing.data[0].texttemplate == "%{y:.2g}"  # each value written: a log axis hides 0.9 vs 0.7
    assert smoothing.layout.yaxis.exponentformat == "power"  # 10^-4, not plotly's SI "100μ"
    # The reference token is a target-language one: the first of the causal mask's translation.
    reference = smoothing.data[0].marker.color.index("#1b6ca8")
    first = model_view.example_translation(bundle, shell.examples_for(bundle) or ["ein Beispiel ."])
    expected = bundle.tokenizer.tokens(first.ids[:1]) or ["<eos>"]
    assert smoothing.layout.xaxis.ticktext[reference] == plots.label(expected[0])
    assert len(masks.data) == 2
    z, text = np.asarray(masks.data[0].z), np.asarray(masks.data[0].text)  # one column per sentence
    assert z.shape == text.shape and 2 <= z.shape[1] <= 3 < z.shape[0]
    assert ((text == "&lt;pad&gt;") == (z == 0)).all()
    assert model_view.defaults(registry, "studio-tiny") == (4000, 100000, 0.1)  # no record: the paper's
    assert "records no training settings" in schedule
    # A warm-up past the steps shown: the curve goes on to its peak, and says so. ε = 0: one bar at 1, whose
    # log axis ends just above 1.
    _, _, _, lr, _, smoothing, _ = model_view.render(registry, "studio-tiny", 4000, 1600, 0.0)
    assert max(lr.data[0].x) == 6000 and max(lr.data[0].y) == pytest.approx(peak)
    assert "drawn past the steps shown" in lr.layout.annotations[0].text
    assert list(smoothing.layout.yaxis.range) == [-1.2, 0.1] and max(smoothing.data[0].y) == 1
    assert model_view.render(registry, "missing", 4000, 20000, 0.1)[0].startswith("No model")
    # A slider moved redraws its own plot alone, as render() draws it.
    assert model_view.lr_only(registry, "studio-tiny", 4000, 1600).to_dict() == lr.to_dict()
    assert model_view.smoothing_only(registry, "studio-tiny", 0.0).to_dict() == smoothing.to_dict()
    assert "no model" in str(model_view.lr_only(registry, "missing", 4000, 1600).to_dict())


def test_model_tab_draws_the_schedule_the_model_trained_with(registry):
    bundle = studio_bundle()
    d = bundle.model.config.d_model
    record = dict(schedule="noam", warmup=30, lr_factor=3.0, max_steps=640, label_smoothing=0.2)
    registry.add("warm-30", type(bundle)(bundle.model, bundle.tokenizer, {"name": "warm-30", "train": record}))
    assert model_view.defaults(registry, "warm-30") == (30, 700, 0.2)  # the whole run, in steps of 100
    _, _, _, lr, schedule, *_ = model_view.render(registry, "warm-30", 30, 700, 0.2)
    assert max(lr.data[0].y) == pytest.approx(3.0 * d ** -0.5 * 30 ** -0.5, rel=0.01)  # the lr factor counts
    assert "lr = 3 · d_model" in lr.layout.title.text and "warmup_steps = 30" in lr.layout.annotations[0].text
    assert "lr factor 3, warm-up 30 steps, 640 steps" in schedule and len(lr.data) == 1
    assert lr.layout.annotations[0].xanchor == "left"  # the label on the line's right, inside the plot
    _, _, _, lr, *_ = model_view.render(registry, "warm-30", 700, 700, 0.2)  # a warm-up at the right edge
    assert lr.layout.annotations[0].xanchor == "right"  # its label on the left, not off the plot
    _, _, _, lr, *_ = model_view.render(registry, "warm-30", 200, 700, 0.2)  # the slider moved: compared
    assert [t.name for t in lr.data] == ["warmup_steps = 200", "its own: warmup_steps = 30"]
    assert max(lr.data[1].y) == pytest.approx(3.0 * d ** -0.5 * 30 ** -0.5, rel=0.01)
    assert max(lr.data[1].y) > max(lr.data[0].y)  # a longer warm-up peaks lower (eq. 3)
    fairseq = dict(schedule="inverse_sqrt", warmup=100, peak_lr=1e-3, max_steps=800)
    registry.add("fairseq", type(bundle)(bundle.model, bundle.tokenizer, {"name": "fairseq", "train": fairseq}))
    _, _, _, lr, schedule, *_ = model_view.render(registry, "fairseq", 100, 800, 0.1)
    assert max(lr.data[0].y) == pytest.approx(1e-3, rel=0.01) and "inverse square root" in schedule
    bad = {"name": "bad", "train": {"warmup": "soon", "schedule": "magic"}}  # a hand-edited config.json
    registry.add("bad", type(bundle)(bundle.model, bundle.tokenizer, bad))
    assert model_view.defaults(registry, "bad") == (4000, 100000, 0.1)
    assert "records no training settings" in model_view.render(registry, "bad", 4000, 20000, 0.1)[4]


# ----- escaping and errors --------------------------------------------------------------------------
def test_user_text_is_escaped_for_markdown_toasts_and_plots(capsys):
    assert md("<img src=x>*bold*") == "&lt;img src=x&gt;\\*bold\\*"
    with pytest.warns(UserWarning, match="&lt;b&gt;x"):
        warn("<b>x")
    info("<b>ü")  # notices carry user text (unknown pieces); outside a request Gradio prints an info toast
    assert capsys.readouterr().out == "&lt;b&gt;ü\n"
    fig = plots.token_probabilities(["<eos>", "a"], [-0.1, -2.0])
    assert list(fig.layout.xaxis.ticktext) == ["&lt;eos&gt;", "a"]


def test_tables_are_markdown_with_escaped_one_line_cells():
    """A cell holding "|", a line break or markup stays one escaped cell of its own row."""
    table = md_table(["n", "text"], [[1, "a | b\n<i>c</i>"], [-2.5, ""]], numeric=(0,))
    lines = table.splitlines()
    assert lines[:2] == ["| n | text |", "| ---: | --- |"] and len(lines) == 4
    assert lines[2] == "| 1 | a \\| b &lt;i&gt;c&lt;/i&gt; |" and lines[3] == "| \\-2\\.5 |   |"
    markdown_it = pytest.importorskip("markdown_it")  # (Gradio draws Markdown in the browser; rich brings this)
    html_table = markdown_it.MarkdownIt("commonmark").enable("table").render(table)
    assert html_table.count("<tr>") == 3 and html_table.count("<td") == 4 and "<i>" not in html_table
    assert "<td>a | b &lt;i&gt;c&lt;/i&gt;</td>" in html_table
    assert md_table(["n"], [], caption="x <y>") == "x &lt;y&gt;\n\n| n |\n| --- |"  # an escaped caption above

def test_guard_turns_surprises_into_readable_errors():
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(gr.Error, match="RuntimeError.*boom"):
        guard(broken)()


def test_bertviz_page_keeps_licence_notices():
    page = bertviz_offline._libraries()
    assert "Mike Bostock" in page and "jquery.org/license" in page


def test_bertviz_views_open_on_the_stack_asked_for():
    maps = [torch.rand(1, 2, 3, 3)]
    for view in (bertviz_offline.head_view, bertviz_offline.model_view):
        page = html.unescape(view({"encoder": maps, "decoder": maps, "cross": maps}, list("abc"), list("xyz")))
        assert '"default_filter": "2"' in page  # bertviz's stacks: encoder 0, decoder 1, cross 2
        assert '<option value="2" selected>Cross</option>' in page
        page = html.unescape(view({"encoder": maps, "decoder": maps, "cross": maps}, list("abc"), list("xyz"),
                                  "decoder"))
        assert '"default_filter": "1"' in page and '<option value="1" selected>Decoder</option>' in page
        assert '"default_filter": "0"' in html.unescape(view({"encoder": maps}, list("abc"), list("xyz")))


def test_bertviz_selects_are_named_for_screen_readers():
    maps = [torch.rand(1, 2, 3, 3)]
    head = html.unescape(bertviz_offline.head_view({"encoder": maps, "cross": maps}, list("abc"), list("xyz")))
    assert '<select id="layer" aria-label="Layer">' in head
    for view in (bertviz_offline.head_view, bertviz_offline.model_view):
        page = html.unescape(view({"encoder": maps, "cross": maps}, list("abc"), list("xyz")))
        assert '<select id="filter" aria-label="Attention stack">' in page
        assert re.findall(r"<select id=\"(?![^>]*aria-label)[^>]*>", page) == []  # (jQuery's code holds bare ones)

def test_sliders_clamp_typed_values_and_attention_ranges_follow_the_picked_model(registry):
    layer = Slider(1, 3, value=1, step=1)
    assert (layer.preprocess(6), layer.preprocess(-2), layer.preprocess(2), layer.preprocess(None)) == (3, 1, 2, 1)
    # A cleared box draws what the box shows once it loses focus: the minimum, not the default
    assert Slider(8, 512, value=128, step=2).preprocess(None) == 8
    bundle = registry.get("studio-tiny")
    c = bundle.model.config
    layers, heads = attention.picked_model_ranges(registry, "studio-tiny")  # before any sentence is analysed
    assert layers.maximum == max(c.encoder_layers, c.decoder_layers, 2) and heads.maximum == max(c.n_heads, 2)
    assert attention.picked_model_ranges(registry, "no such model") == (gr.skip(), gr.skip())
    # Layer 6, head 8 shown, then a smaller model picked: the boxes come down to what is drawn.
    layers, heads = attention.picked_model_ranges(registry, "studio-tiny", 6, 8)
    assert (layers.value, heads.value) == (layers.maximum, heads.maximum)


# ----- on a phone -----------------------------------------------------------------------------------
def test_long_titles_wrap_for_a_phone_outside_tags():
    marked = plots.label("\u2581word")  # the grey word-start marker's <span style="...">
    wrapped = plots.wrap(f"Probability of each output token (orange: below 0.5; {marked} starts a word)")
    lines = wrapped.split("<br>")
    assert len(lines) == 3 and all(len(re.sub(r"<[^>]+>", "", line)) <= plots.NARROW_CHARS for line in lines)
    assert marked in wrapped  # no break inside the span's tag
    assert plots.wrap("Short title") == "Short title"
    assert plots.wrap("Encoder self-attention<br>every layer (rows) × head") == \
        "Encoder self-attention<br>every layer (rows) × head"  # lines of its own, each short enough, kept
    with pytest.raises(ValueError, match="a title for each of the 2 panels"):
        plots.stacked(make_subplots(rows=1, cols=2, subplot_titles=["Loss", ""]), 1, 2, 600, vertical_spacing=0.1)


def test_figures_carry_their_phone_layout():
    figure = plots.token_probabilities(["\u2581A", "\u2581dog", "<eos>"], [-0.1, -0.7, -0.05])
    narrow = figure.layout.meta["narrow"]
    assert "<br>" in narrow["title.text"] and narrow["font.size"] == plots.NARROW_FONT
    assert narrow["margin.t"] == plots.title_room(figure.layout.title.text)  # room for its lines below Gradio's label
    masks = plots.masks([["a", "b"], ["c"]], np.array([[False, False], [False, True]]), ["x", "y"])
    narrow = masks.layout.meta["narrow"]  # the two masks one above the other, each the column's width
    assert narrow["xaxis.domain"] == narrow["xaxis2.domain"] == [0.0, 1.0]
    assert narrow["yaxis2.domain"][1] < narrow["yaxis.domain"][0]
    assert narrow["annotations[1].y"] == narrow["yaxis2.domain"][1]  # the second title above its panel
    shares = plots.parameter_shares({"Embeddings": 2_048_000, "Decoder masked self-attention": 789_504})
    narrow = shares.layout.meta["narrow"]  # long part names on two lines, in a margin a phone can spare
    assert narrow["yaxis.ticktext"][0] == "Decoder masked<br>self-attention" and narrow["margin.l"] < 120
    smoothing = plots.label_smoothing(np.array([0.9, 0.05, 0.05]), ["a", "b", "c"], 0, 0.1)
    assert smoothing.layout.meta["narrow"]["data[0].textangle"] == -90  # each value up its bar, in legible type
    head = plots.attention_head(np.eye(3), ["a", "b", "c"], ["x", "y", "z"], "t", "query", "key")
    narrow = head.layout.meta["narrow"]  # a slim colour bar and upright labels: the map keeps the phone's width
    assert narrow["data[0].colorbar.thickness"] < 15 and narrow["xaxis.tickangle"] == -90
    assert head.data[0].colorbar.thickness is None  # the wide page's bar as plotly draws it


def test_sampling_starts_from_a_tempered_nucleus():
    """T = 1 with no cut-off read as nonsense on stage with the small model; the sliders start lower."""
    demo = app.build_app(studio_registry())
    labels = ("temperature", "top-p (1: off)")
    value = {b.label: b.value for b in demo.blocks.values() if getattr(b, "label", None) in labels}
    assert value == {"temperature": translate.SAMPLE_TEMPERATURE, "top-p (1: off)": translate.SAMPLE_TOP_P}
    assert translate.SAMPLE_TEMPERATURE < 1 and translate.SAMPLE_TOP_P < 1
