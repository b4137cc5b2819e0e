"""studio.notebook's views, one line each, against the shipped models: every one draws a figure with data and gives
its numbers, saves, and reads as the Download menu's table; a model is a bundle, a checkpoint or a run folder; bad
input is refused in words; and importing the package loads no Gradio and starts nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

import studio.notebook as nb
from core.bundle import ModelBundle
from core.checkpoint import save_checkpoint
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio.notebook.view import figure_json, figure_rows
from tests.helpers.shipped import NUMBERS, SHIPPED

ROOT = Path(__file__).resolve().parents[3]
SENTENCE = "Zwei Hunde spielen im Gras."
ONE_LINERS = {
    "translation": lambda m: nb.translation(m, SENTENCE),
    "translation, greedy": lambda m: nb.translation(m, SENTENCE, method="greedy"),
    "every layer and head": lambda m: nb.attention(m, SENTENCE, stack="decoder"),
    "one head": lambda m: nb.attention(m, SENTENCE, stack="encoder", layer=2, head=3),
    "a layer's mean": lambda m: nb.attention(m, SENTENCE, layer=0, target="Two dogs play."),
    "arithmetic, keys": lambda m: nb.arithmetic(m, SENTENCE, stack="decoder", layer=1, head=2, query=3),
    "arithmetic, values": lambda m: nb.arithmetic(m, SENTENCE, part="values"),
    "arithmetic, output": lambda m: nb.arithmetic(m, SENTENCE, part="output"),
    "beam tree, two steps": lambda m: nb.beam_tree(m, SENTENCE, beam_size=3, steps=2),
    "saliency": lambda m: nb.saliency(m, SENTENCE),
    "saliency agreement": lambda m: nb.saliency(m, SENTENCE, method="integrated_gradients", steps=4, part="agreement"),
    "positions": lambda m: nb.positional_encoding(m),
    "positions as curves": lambda m: nb.positional_encoding(m, length=20, part="curves", dims=[0, 1, 6]),
    "positions' similarity": lambda m: nb.positional_encoding(64, part="similarity"),
    "parameters": nb.parameters,
    "schedule": lambda m: nb.schedule(m, warmup=400),
    "label smoothing": lambda m: nb.label_smoothing(m, eps=0.2),
    "masks": lambda m: nb.masks(m, ["Ein Hund.", SENTENCE]),
    "table 3": lambda m: nb.table3(),
    "knock-out": lambda m: nb.knockout(m, "Zwei Hunde jagen eine Katze."),
    "knock-out's attention": lambda m: nb.knockout(m, SENTENCE, part="heads", where="cross.2.1", show="attention"),
    "logit lens": lambda m: nb.logit_lens(m, SENTENCE, top_k=3),
    "free running": lambda m: nb.free_running(m, SENTENCE, "Two dogs are playing in the grass."),
    "why not": lambda m: nb.why_not(m, SENTENCE, position=2, foil="\u2581are", method="grad_x_input"),
}


@pytest.mark.parametrize("name", ONE_LINERS)
def test_every_view_draws_a_figure_with_data_and_gives_its_numbers(shipped, name):
    view = ONE_LINERS[name](shipped)
    assert isinstance(view.figure, go.Figure) and view.figure.data
    assert len(view.table()) > 0 and view.numbers
    json.dumps(view.numbers)  # plain data: what a script writes out


def test_the_views_say_what_the_studio_says(shipped):
    translated = nb.translation(shipped, SENTENCE)
    assert translated.numbers["translation"] == "Two dogs play in the grass."
    assert [h["rank"] for h in translated.numbers["n_best"]] == [1, 2, 3, 4]
    assert translated.note.startswith("**Two dogs play in the grass\\.**")  # escaped Markdown: it reads as typed
    cross = nb.attention(shipped, SENTENCE).numbers
    assert len(cross["weights"]) == 3 and cross["key_tokens"][-1] == "<eos>"
    a = nb.arithmetic(shipped, SENTENCE, layer=1, head=2, query=1).numbers  # /attention_arithmetic's JSON
    assert a["query_token"] == "\u2581Two" and max(a["weights"]) > 0.9
    tree = nb.beam_tree(shipped, SENTENCE)
    assert tree.numbers["done"] and tree.numbers["hypotheses"][0]["tokens"].startswith("\u2423Two \u2423dogs")
    assert "&lt;eos&gt;" in tree.note  # Markdown that keeps a token as text (a bare <eos> is an HTML tag)


@pytest.mark.parametrize("view", ["head", "model"])
def test_bertviz_views_are_pages_that_load_nothing(shipped, view, tmp_path):
    page = (nb.head_view if view == "head" else nb.model_view)(shipped, SENTENCE, stack="encoder")
    assert page._repr_html_().startswith("<iframe") and 'sandbox="allow-scripts"' in page.frame
    saved = page.write_html(tmp_path / "view.html").read_text(encoding="utf-8")
    assert saved.startswith("<!DOCTYPE html>") and "Hunde" in saved and 'src="http' not in saved


def test_a_view_saves_as_html_and_as_an_image(numbers, tmp_path):
    view = nb.attention(numbers, "twenty - one")
    page = view.write_html(tmp_path / "attention.html").read_text(encoding="utf-8")
    assert "plotly" in page and "twenty" in page and 'src="http' not in page  # plotly.js inlined: offline
    pytest.importorskip("kaleido", reason="kaleido is missing: pip install -e '.[notebook]'")
    try:
        png = view.write_image(tmp_path / "attention.png")
    except RuntimeError as exc:  # kaleido without a Chrome or Chromium to drive
        pytest.skip(str(exc))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_numbers_are_the_download_menus_a_row_per_point_tokens_named():
    fig = go.Figure(go.Heatmap(z=[[0.25, None], [0.5, 0.75]], customdata=[["a &lt;b&gt;", ""], ["c", "d"]],
                               colorbar=dict(title=dict(text="weight"))))
    fig.update_xaxes(tickmode="array", tickvals=[0, 1], ticktext=["<b>x0</b>", "&lt;eos&gt;"], title="key")
    fig.update_layout(title="t<br>two lines", meta={"labels": {"yaxis": [[0, "q0"], [1, "q1"]]}})
    fig.add_trace(go.Bar(x=[0, 1], y=[0.1, 0.9], name="bars", xaxis="x", yaxis="y"))
    rows = figure_rows(fig)
    assert rows[0] == {"trace": "heatmap 1", "x": 0, "x_label": "x0", "y": 0, "y_label": "q0", "value": 0.25,
                       "text": "a <b>", "x_title": "key", "y_title": "", "value_title": "weight"}
    assert len(rows) == 3 + 2 and rows[2]["x_label"] == "<eos>" and rows[-1]["value"] == 0.9
    written = figure_json(fig, "attention")
    assert written["title"] == "t two lines" and written["axes"]["xaxis"]["tick_labels"] == {"0": "x0", "1": "<eos>"}
    assert written["traces"][1]["y"] == [0.1, 0.9] and written["traces"][0]["value_title"] == "weight"


def test_a_model_is_a_bundle_a_checkpoint_or_a_run_folders_newest(numbers, tmp_path):
    assert nb.bundle_of(numbers) is numbers
    assert nb.bundle_of(str(NUMBERS)).model.config == numbers.model.config
    run = tmp_path / "run"
    for step in (10, 200):
        save_checkpoint(run / f"step-{step:07d}", numbers)
    assert nb.bundle_of(run).path.name == "step-0000200"
    with pytest.raises(FileNotFoundError, match="neither a checkpoint"):
        nb.bundle_of(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        nb.bundle_of(tmp_path / "missing")
    with pytest.raises(TypeError, match="expected a model"):
        nb.translation(42, "twenty - one")


def test_bad_input_is_refused_in_words(numbers):
    for call, words in ((lambda: nb.attention(numbers, "twenty - one", layer=5), "layer 5 is out of range"),
                        (lambda: nb.attention(numbers, "twenty - one", layer=0, head=-1), "head -1 is out of range"),
                        (lambda: nb.attention(numbers, "twenty - one", stack="crosss"), "unknown attention stack"),
                        (lambda: nb.attention(numbers, "   "), "no tokens"),
                        (lambda: nb.arithmetic(numbers, "twenty - one", part="all"), "unknown part"),
                        (lambda: nb.arithmetic(numbers, "twenty - one", layer=7), "layer"),
                        (lambda: nb.saliency(numbers, "twenty - one", method="lime"), "unknown attribution method"),
                        (lambda: nb.positional_encoding(7), "must be even"),
                        (lambda: nb.positional_encoding(8, dims=[9], part="curves"), "dims must be"),
                        (lambda: nb.learned_positions(numbers), "not learned positions"),
                        (lambda: nb.label_smoothing(numbers, eps=1.5), "eps must be"),
                        (lambda: nb.knockout(numbers, "twenty - one", part="wings"), "unknown part"),
                        (lambda: nb.knockout(numbers, "twenty - one", show="all"), "unknown show")):
        with pytest.raises(ValueError, match=words):
            call()


def test_learned_positions_are_drawn_for_a_model_that_has_them(numbers):
    config = ModelConfig.from_preset("tiny", src_vocab_size=numbers.tokenizer.vocab_size,
                                     tgt_vocab_size=numbers.tokenizer.vocab_size, positional="learned")
    learned = ModelBundle(Transformer(config), numbers.tokenizer, {"name": "learned"})
    assert nb.learned_positions(learned, length=10).figure.data
    assert len(nb.learned_positions(learned, part="similarity").numbers["positions"]) == 60


def test_a_run_folders_curves_come_from_its_metrics(tmp_path):
    lines = [{"step": s, "loss": 5.0 / s, "perplexity": 9.0 / s, "accuracy": s / 10, "lr": 1e-3, "tokens_per_s": 900}
             for s in (1, 2, 3)]
    lines[-1]["validation"] = {"val_loss": 1.0, "val_perplexity": 2.0, "bleu": 50.0, "exact_match": 0.5,
                               "samples": [{"source": "a", "reference": "b", "output": "b"}]}
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    view = nb.curves(tmp_path)
    assert view.figure.data and view.numbers["evaluations"][0]["bleu"] == 50.0 and "**b**" in view.note
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        nb.curves(tmp_path / "elsewhere")


def test_importing_it_loads_no_gradio_starts_nothing_and_takes_little_time():
    code = ("import sys, threading, time; import core; started = time.perf_counter(); import studio.notebook; "
            "print(time.perf_counter() - started, 'gradio' in sys.modules, threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    seconds, gradio, threads = out.split()
    assert gradio == "False" and threads == "1"  # no server thread
    assert float(seconds) < 3.0, f"{float(seconds):.1f} s beyond core's own import"


def test_no_view_loads_gradio_not_even_those_the_tabs_draw_too():
    """The Model tab's and the Beam search tab's views are drawn by the tabs' own numbers (studio/numbers/), which
    import no Gradio: a notebook never waits for it."""
    code = ("import sys; import studio.notebook as nb; from tests.helpers.studio import SENTENCES, studio_bundle; "
            "b = studio_bundle(); [view(b) for view in (nb.parameters, nb.schedule, nb.label_smoothing, nb.masks)]; "
            "nb.beam_tree(b, SENTENCES[0], steps=2); print('gradio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split()[-1] == "False"


@pytest.mark.skipif(not SHIPPED.exists(), reason="multi30k-de-en-small is not shipped")
def test_the_shipped_model_is_named_by_its_folder():
    assert nb.translation(str(SHIPPED), "Ein Hund.").numbers["translation"]
