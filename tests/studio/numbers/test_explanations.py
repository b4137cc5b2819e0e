"""The explaining tabs (What if, Attention arithmetic, Saliency) and their API endpoints (/score,
/attention_arithmetic, /saliency), called directly and through gradio_client: the numbers they show
are core's, the arithmetic's weights are the Attention tab's, and bad input gets a message that names it."""
from __future__ import annotations

import copy
import html
import json
import re

import gradio as gr
import numpy as np
import pytest

import core
from core.bundle import ModelBundle
from core.explain.saliency import compare
from studio import app, plots
from studio.numbers import explanations
from studio.server import api
from studio.server.limits import MAX_IG_STEPS
from studio.server.registry import ModelRegistry
from studio.shell import Current
from studio.tabs import arithmetic, attention, saliency, translate, what_if
from studio.tabs.looked_at import Looked, looked_at
from studio.train.job import TrainingJob
from tests.helpers.studio import SENTENCES, studio_bundle

NAME = "studio-tiny"
CROSS = arithmetic.FIRST_STACK


@pytest.fixture
def current(registry) -> Current:
    """The Translate tab's translation of the first example (greedy: the untrained model writes words)."""
    return translate.translate(registry, NAME, SENTENCES[0], "greedy", 4, 0.6, 6, 1, 1.0, 0, 1.0, None)[-1]


def notice_text(markdown: str) -> str:
    """Markdown as it reads: escapes and entities undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", markdown))


# ----- What if --------------------------------------------------------------------------------------
def test_what_if_scores_a_target_token_by_token_beside_the_models_own(registry, current):
    chips, totals, figure, notices, kept = what_if.score_target(registry, None, current, NAME, SENTENCES[0],
                                                                "Ein Hund rennt durch den Schnee .")
    expected = core.score(current.bundle, [SENTENCES[0]], ["Ein Hund rennt durch den Schnee ."], top_k=5)[0]
    # (Scored in one batch with the model's own translation: padded, equal to float32's rounding.)
    assert kept.target.token_logprobs == pytest.approx(expected.token_logprobs, abs=1e-5)
    assert kept.target.ranks == expected.ranks
    assert kept.own == current.ids  # the Translate tab's translation, not a second one
    assert chips.count('class="token-chip"') == len(expected.tokens) and "&lt;eos&gt;" in chips
    for rank, top in zip(expected.ranks, expected.alternatives):  # the model's choice shown where it differs
        assert (f"model: {top[0][0]}" in chips) or rank == 1
    assert "chip-legend" in chips and "probability" in chips
    assert "your target" in totals and "the model's translation" in totals and "nats" in totals
    assert f"{kept.target.sum:.3f}".replace("-", "\\-").replace(".", "\\.") in totals
    assert list(figure.data[0].y) == pytest.approx(np.exp(expected.token_logprobs).tolist())
    assert notices == ""


def test_what_if_translates_a_source_of_its_own(registry):
    """Nothing translated yet (or another source typed): the model's own translation is made here, with the
    Translate tab's default settings."""
    *_, kept = what_if.score_target(registry, None, Current(), NAME, SENTENCES[1], "Zwei junge")
    expected = core.translate_detailed(studio_bundle(), [SENTENCES[1]])[0]
    assert kept.own == expected.ids and kept.options.method == "beam" and kept.target.tokens[-1] == "<eos>"


def test_what_if_says_when_the_target_is_the_models_own_translation(registry, current):
    text = current.bundle.tokenizer.decode(current.ids)
    *_, kept = what_if.score_target(registry, None, current, NAME, SENTENCES[0], text)
    assert kept.target.ids == kept.own_score.ids
    assert "is the model's own translation" in what_if.totals_table(kept)


def test_what_if_refuses_an_empty_source_and_scores_an_empty_or_long_target_with_a_notice(registry, current):
    refused = what_if.score_target(registry, None, current, NAME, "  ", "Ein Hund")
    assert refused[:3] == (gr.skip(),) * 3 and refused[-1] == gr.skip()
    assert "Cannot score" in refused[3] and "source sentence is empty" in notice_text(refused[3])
    chips, _, _, notices, kept = what_if.score_target(registry, None, current, NAME, SENTENCES[0], "")
    assert kept.target.tokens == ["<eos>"] and "only <eos> is scored" in notice_text(notices)
    long = " ".join(["Hund"] * 40)  # studio_bundle's max_len is 24
    *_, notices, kept = what_if.score_target(registry, None, current, NAME, SENTENCES[0], long)
    assert len(kept.target.tokens) == 23 and "target truncated from 40 to 22 tokens" in notice_text(notices)


def test_what_if_finishes_a_beginning_with_the_translate_tabs_settings(registry, current):
    box, chips, totals, figure, notices, kept = what_if.finish(registry, None, current, NAME, SENTENCES[0], "Zwei Hund")
    expected = core.translate_detailed(current.bundle, [SENTENCES[0]], current.options, prefix="Zwei Hund")[0]
    assert box == expected.text and box.startswith("Zwei Hund")
    assert kept.forced == expected.ids and "greedy decoding" in notice_text(notices) and "first 2 tokens" in notices
    refused = what_if.finish(registry, None, current, NAME, SENTENCES[0], "Zwei Katzen")
    assert refused[0] == gr.skip() and "Cannot finish" in refused[4]
    assert "cannot write 'Katzen'" in notice_text(refused[4])
    assert "type the beginning" in what_if.finish(registry, None, current, NAME, SENTENCES[0], " ")[4]


def test_show_in_attention_hands_the_forced_target_to_the_attention_tab(registry, current):
    *_, kept = what_if.score_target(registry, None, current, NAME, SENTENCES[0], "Ein Hund rennt")
    handed, on_screen, tabs, *view = what_if.show_in_attention(registry, kept, current, NAME, SENTENCES[0],
                                                               "Ein Hund rennt")
    assert on_screen == attention.TAB_ID and tabs.selected == attention.TAB_ID and view == [gr.skip()] * 5
    assert handed.forced == kept.forced and handed.ids == current.ids and handed.bundle is current.bundle
    analysis, header, *_ = attention.show(registry, handed)
    assert analysis.out_tokens == ["Ein", "Hund", "rennt", "<eos>"]
    assert "Target (forced on the What if tab)" in header
    # A target edited since it was scored (or never scored) is scored first: the tabs get the boxes' pair.
    handed, _, _, chips, *_, rescored = what_if.show_in_attention(registry, kept, current, NAME, SENTENCES[0],
                                                                  "Ein Hund")
    assert handed.forced == rescored.forced == [5, 9] and chips.count('class="token-chip"') == 3
    refused = what_if.show_in_attention(registry, None, current, NAME, " ", "Ein")
    assert refused[:3] == (gr.skip(),) * 3 and "source sentence is empty" in notice_text(refused[6])


def test_what_if_fills_its_boxes_from_a_new_translation_only_on_screen(registry, current):
    assert what_if.fill(current, None, "translate", "", "") == (gr.skip(),) * 2
    assert what_if.refresh(registry, None, current, None, "translate", NAME, "", "") == (gr.skip(),) * 8
    source, target = what_if.fill(current, None, what_if.TAB_ID, "", "")
    assert source == SENTENCES[0] and target == current.bundle.tokenizer.decode(current.ids)
    *boxes, chips, _, _, notices, _, drawn = what_if.refresh(registry, None, current, None, what_if.TAB_ID, NAME,
                                                             source, target)
    assert boxes == [gr.skip()] * 2 and drawn is current and "token-chip" in chips
    assert "Kept what you typed" not in (notices or "")
    # Scoring that began before fill() saw the translation (the tab just opened): the empty boxes get its pair.
    *boxes, chips, _, _, _, _, drawn = what_if.refresh(registry, None, current, None, what_if.TAB_ID, NAME, "", "")
    assert boxes == [source, target] and "token-chip" in chips and drawn is current
    assert what_if.fill(current, current, what_if.TAB_ID, source, target) == (gr.skip(),) * 2
    assert what_if.refresh(registry, None, current, current, what_if.TAB_ID, NAME, source, target) == (gr.skip(),) * 8


def test_what_if_keeps_what_a_student_typed_over_a_new_translation(registry, current):
    """Typed before the tab filled its boxes (or over what it showed last): kept, scored, and said."""
    assert what_if.fill(current, None, what_if.TAB_ID, "Ein Hund.", "A dog.") == (gr.skip(),) * 2
    *_, notices, scored, drawn = what_if.refresh(registry, None, current, None, what_if.TAB_ID, NAME, "Ein Hund.",
                                                 "A dog.")
    assert scored.source == "Ein Hund." and drawn is current and "Kept what you typed" in notices


# ----- Attention arithmetic -----------------------------------------------------------------------------
def test_arithmetic_weights_equal_the_attention_tabs_map_rows(registry, current):
    looked = looked_at(registry, current, NAME)
    analysis = attention.analyse(current.bundle, NAME, current.source, current.ids)
    for label, stack in attention.STACKS.items():
        maps = analysis.maps[stack]
        for layer, head, query in ((0, 0, 0), (maps.shape[0] - 1, maps.shape[1] - 1, maps.shape[2] - 1), (1, 2, 1)):
            a = explanations.arithmetic(looked.bundle, looked.source, looked.target, stack, layer, head, query)
            np.testing.assert_allclose(a.weights, maps[layer, head, query], atol=1e-6)
            first, table, second, third, notices = arithmetic.draw(looked, label, layer + 1, head + 1, query)
            assert np.asarray(second.data[0].z)[0] == pytest.approx(maps[layer, head, query], abs=1e-6)
            assert f"{a.weights.sum():.4f}" == "1.0000" and "sum of the weights" in table


def test_arithmetic_shows_every_step_with_its_equation(registry, current):
    looked = looked_at(registry, current, NAME)
    first, table, second, third, _ = arithmetic.draw(looked, "Decoder self-attention", 1, 1, 1)
    titles = " ".join(a.text for f in (first, second, third) for a in f.layout.annotations)
    for step in ("q = x·W", "k<sub>j</sub>", "v<sub>j</sub>", "Σ<sub>j</sub> w<sub>j</sub> v<sub>j</sub>", "Concat(",
                 "Concat·W<sup>O</sup>", "x + MultiHead", "LayerNorm(x + MultiHead)"):
        assert step in titles, step
    assert "÷√d_k" in table and "softmax w_j" in table
    assert "−∞" in table  # the decoder's mask after query position 1
    c = current.bundle.model.config
    assert np.asarray(first.data[0].z).shape == (1, c.d_model) and np.asarray(first.data[1].z).shape == (1, c.d_head)


def test_arithmetic_says_what_is_out_of_range(registry, current):
    looked = looked_at(registry, current, NAME)
    *_, notices = arithmetic.draw(looked, CROSS, 1, 1, 99)
    assert "Cannot compute" in notices and "query 99 is out of range" in notice_text(notices)
    with pytest.raises(explanations.Refused, match="unknown attention stack"):
        explanations.arithmetic(looked.bundle, looked.source, looked.target, "sideways", 0, 0, 0)
    with pytest.raises(explanations.Refused, match="layer must be a whole number"):
        explanations.arithmetic(looked.bundle, looked.source, looked.target, "cross", 0.5, 0, 0)


def test_arithmetic_query_picker_follows_the_stack(registry, current):
    looked = looked_at(registry, current, NAME)
    picker, query = arithmetic.query_picker(looked, "encoder", None)
    assert [c[1] for c in picker.choices] == list(range(len(SENTENCES[0].split()) + 1)) and query == 1
    picker, query = arithmetic.query_picker(looked, "cross", 40)  # beyond the target: back to the first word
    assert picker.choices[0][0] == f"1 · <bos> (predicts {looked.bundle.tokenizer.tokens(current.ids[:1])[0]})"
    assert query == 1
    layer, head, *_ = arithmetic.fitted(looked, "encoder", 9, 0)
    assert (layer, head) == (current.bundle.model.config.encoder_layers, 1)


def test_explaining_tabs_wait_for_a_translation_and_the_picked_model(registry, current):
    assert looked_at(registry, Current(), NAME).startswith("*No sentence yet")
    registry.add("other", studio_bundle())
    assert "Model changed to" in looked_at(registry, current, "other")
    assert isinstance(looked_at(registry, current, NAME), Looked)
    # A model training live publishes newer weights under its name (the same key): the pair is still explained
    # with the weights that translated it, as the Attention tab draws it.
    snapshot = ModelBundle(copy.deepcopy(current.bundle.model), current.bundle.tokenizer, current.bundle.info)
    registry.add(NAME, snapshot, same_model=True)
    assert looked_at(registry, current, NAME).bundle is current.bundle
    assert arithmetic.refresh(registry, current, None, "translate", NAME, CROSS, 1, 1, None) == (gr.skip(),) * 11
    assert saliency.refresh(registry, current, None, "translate", NAME, "gradient × input", 32) == (gr.skip(),) * 8


# ----- Saliency ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("label,method,steps", [("gradient × input", "grad_x_input", 32),
                                                ("integrated gradients", "integrated_gradients", 4)])
def test_saliency_shows_core_attribution_beside_cross_attention(registry, current, label, method, steps):
    looked = looked_at(registry, current, NAME)
    maps, agreement, bars, aligned, notices = saliency.draw(looked, label, steps)
    expected = core.attribution(current.bundle, SENTENCES[0], current.ids, method, steps)
    np.testing.assert_allclose(np.asarray(maps.data[0].z), expected, atol=1e-9)
    layers = [core.cross_attention(current.bundle, SENTENCES[0], current.ids, layer) for layer in range(2)]
    np.testing.assert_allclose(np.asarray(maps.data[1].z), np.mean(layers, axis=0), atol=1e-6)
    s = explanations.saliency(current.bundle, SENTENCES[0], current.ids, method, steps)
    c = compare(expected, np.mean(layers, axis=0), s.source_tokens, s.target_tokens)
    assert f"source token is the most-attended one for {c.agreed} of {c.compared} target tokens" in agreement
    assert c.compared == len(s.target_tokens) - 1 and "No rank correlation: 7 source tokens are too few" in agreement
    np.testing.assert_array_equal(s.agreement, c.top)
    # The bars: the attention on each target token's most-attributed source token, dark where it is the most-attended.
    agreeing, differing, ticks = bars.data
    shares = dict(zip(agreeing.x, agreeing.y)) | dict(zip(differing.x, differing.y))
    np.testing.assert_allclose([shares[i] for i in range(c.compared)], c.share[:-1], atol=1e-9)
    np.testing.assert_allclose(np.asarray(ticks.y, dtype=float), c.top_share[:-1], atol=1e-9)
    assert len(agreeing.x) == c.agreed and f"{c.agreed} of {c.compared}" in bars.layout.title.text
    assert s.alignment == core.alignment(current.bundle, SENTENCES[0], current.ids)
    assert "→" in aligned and "Word alignments" in aligned
    # The sign convention, on the plot: under the attribution map's heading and at its colour bar's ends.
    heading = maps.layout.annotations[0].text
    assert "purple</span>: raised p(target token)" in heading and "orange</span>: lowered it" in heading
    ends = maps.data[0].colorbar.ticktext
    assert ends[0].endswith("lowered") and ends[-1].endswith("raised")


def fake_saliency(attribution: np.ndarray, attention: np.ndarray, source: list[str], target: list[str]
                  ) -> explanations.Saliency:
    return explanations.Saliency("grad_x_input", 1, source, target, attribution, attention,
                            compare(attribution, attention, source, target), [], [])


def test_the_agreement_line_counts_and_gives_no_verdict_that_flips_on_noise():
    """Issue 51: the old line said "partly agree" at a mean rho of 0.49 and "agree" at 0.53. The new one counts
    the target tokens whose most-attributed source token is the most-attended one, beside chance; nudging the small
    weights (noise) changes neither the count nor a word of the line."""
    source, target = ["▁Zwei", "▁Hunde", "▁spielen", "<eos>"], ["▁Two", "▁dogs", "▁play", "<eos>"]
    attribution = np.array([[0.7, 0.1, 0.15, 0.05], [0.1, 0.75, 0.05, 0.1], [0.3, 0.1, 0.5, 0.1], [0.2, 0.1, 0.3, 0.4]])
    attention = np.array([[0.6, 0.05, 0.02, 0.33], [0.01, 0.66, 0.09, 0.24], [0.5, 0.1, 0.3, 0.1], [0.1] * 3 + [0.7]])
    line = saliency.agreement_line(fake_saliency(attribution, attention, source, target))
    assert line.startswith("**Agreement: the most-attributed source token is the most-attended one for 2 of 3 "
                           "target tokens**") and "by chance: 1 in 3" in line
    assert "No rank correlation: 3 source tokens are too few for one to mean anything (it needs 8)" in line
    assert not re.search(r"\b(partly|hardly) agree|Spearman", line)
    noise = np.random.default_rng(0).uniform(-0.02, 0.02, attribution.shape)
    assert saliency.agreement_line(fake_saliency(attribution + noise, attention, source, target)) == line
    # From 8 source words up, Spearman's rho over them joins the count.
    words = [f"w{i}" for i in range(8)] + ["<eos>"]
    rng = np.random.default_rng(1)
    long = fake_saliency(rng.normal(size=(3, 9)), rng.dirichlet(np.ones(9), size=3), words, ["a", "b", "<eos>"])
    rho = f"Over all 8 source tokens, Spearman's ρ of |attribution| and attention averages {long.compared.mean_rho:.2f}"
    assert rho in saliency.agreement_line(long)
    empty = fake_saliency(np.ones((1, 2)), np.full((1, 2), 0.5), ["a", "<eos>"], ["<eos>"])
    assert "nothing to compare" in saliency.agreement_line(empty)
    assert plots.agreement_bars(empty.compared, empty.source_tokens, empty.target_tokens, "t").layout.annotations


def test_saliency_refuses_an_unknown_method_and_steps_out_of_range(registry, current):
    looked = looked_at(registry, current, NAME)
    assert "unknown attribution method 'lime'" in notice_text(saliency.draw(looked, "lime", 32)[-1])
    with pytest.raises(explanations.Refused, match=f"steps must be from 1 to {MAX_IG_STEPS}"):
        explanations.saliency(looked.bundle, looked.source, looked.target, "integrated_gradients", MAX_IG_STEPS + 1)


# ----- the API ---------------------------------------------------------------------------------------------
def endpoints(registry) -> dict:
    """The gr.api functions by name, as Gradio calls them."""
    with gr.Blocks() as demo:
        api.register(registry, TrainingJob(registry))
    return {fn.api_name: fn.fn for fn in demo.fns.values()}


def test_api_answers_plain_json_with_the_pages_checks(registry):
    calls = endpoints(registry)
    assert set(calls) == {"score", "attention", "attention_arithmetic", "saliency", "train_status"}
    scored = calls["score"](NAME, SENTENCES[0] + "\x07", "Ein Hund")
    arith = calls["attention_arithmetic"](NAME, SENTENCES[0], "Ein Hund", "decoder", 1, 0, 1)
    salient = calls["saliency"](NAME, SENTENCES[0], "Ein Hund", "integrated_gradients", 4)
    for answer in (scored, arith, salient):
        json.dumps(answer, allow_nan=False)  # no NaN or infinity: JSON has none
    assert scored["tokens"] == ["Ein", "Hund", "<eos>"] and len(scored["alternatives"][0]) == explanations.TOP_K
    assert scored["notices"] == ["source: 1 control character replaced by spaces"]
    assert scored["totals"]["logprob"] == pytest.approx(sum(scored["logprobs"]))
    assert arith["mask"] == [0.0, 0.0, "-inf"] and arith["weights"][2] == 0.0
    assert arith["query_token"] == "Ein" and len(arith["q"]) == arith["d_k"]
    assert len(salient["attribution"]) == 3 and len(salient["attribution"][0]) == len(SENTENCES[0].split()) + 1
    assert salient["steps"] == 4 and len(salient["agreement"]["per_token"]) == 3
    assert salient["agreement"]["per_token"][-1] is None and salient["agreement"]["compared"] == 2  # <eos> aside
    assert salient["agreement"]["mean"] == salient["agreement"]["agreed"] / 2 and salient["agreement"]["spearman"] == [
        None] * 3  # 7 source words: too few for a rank correlation
    for name, args, message in [
            ("score", ("nope", "a", "b"), "no model called 'nope'"),
            ("score", (NAME, "", "Ein"), "the source sentence is empty"),
            ("attention_arithmetic", (NAME, SENTENCES[0], "Ein", "cross", 0, 0, 7), "query 7 is out of range 0..1"),
            ("attention_arithmetic", (NAME, SENTENCES[0], "Ein", "cross", 0, 9, 0), "head 9 is out of range"),
            ("saliency", (NAME, SENTENCES[0], "Ein", "lime", 4), "unknown attribution method 'lime'"),
            ("saliency", (NAME, SENTENCES[0], "Ein", "integrated_gradients", 0), "steps must be from 1")]:
        with pytest.raises(gr.Error, match=re.escape(message)):
            calls[name](*args)


def test_api_through_gradio_client(registry):
    client_module = pytest.importorskip("gradio_client")
    demo = app.build_app(registry)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        client = client_module.Client(demo.local_url, verbose=False)
        scored = client.predict(model=NAME, source=SENTENCES[0], target="Ein Hund", api_name="/score")
        assert scored["tokens"] == ["Ein", "Hund", "<eos>"]
        arith = client.predict(model=NAME, source=SENTENCES[0], target="Ein Hund", stack="encoder", layer=0, head=1,
                               query=2, api_name="/attention_arithmetic")
        assert sum(arith["weights"]) == pytest.approx(1.0, abs=1e-5)
        salient = client.predict(model=NAME, source=SENTENCES[0], target="Ein Hund", api_name="/saliency")
        assert salient["method"] == "grad_x_input" and salient["alignment_tokens"][0][1] == "Ein"
        with pytest.raises(Exception, match="query 5 is out of range"):
            client.predict(model=NAME, source=SENTENCES[0], target="Ein", query=5, api_name="/attention_arithmetic")
    finally:
        demo.close()


def test_plots_escape_tokens_and_colour_by_probability():
    chips = plots.token_chips(["<b>x</b>", "<eos>"], [np.log(0.02), np.log(0.9)], [7, 1],
                              [[("▁dog", 0.8)], [("<eos>", 0.9)]], "tokens")
    assert "<b>" not in chips and "&lt;b&gt;x&lt;/b&gt;" in chips and "model: ␣dog 0.80" in chips
    dark, light = plots.what_if.probability_colour(0.02), plots.what_if.probability_colour(0.9)
    assert dark[1] == "#fff" and light[1] == "#000"  # readable type on viridis' dark and light ends


def test_arithmetic_opens_on_a_head_whose_weights_spread_over_words():
    """Issue 51: the shipped model's layer 1, head 1, first query puts nearly all its weight on <eos>; the first view
    opens instead on the query and head of highest entropy over real words, which get at least half the weight."""
    shipped = ModelRegistry()
    bundle = shipped.get("multi30k-de-en-small")
    source = "Zwei Hunde spielen im Schnee."
    ids = core.translate_detailed(bundle, [source])[0].ids
    looked = Looked("multi30k-de-en-small", bundle, source, ids, forced=False)
    layer, head, query = arithmetic.teaching_view(looked, "cross")
    a = explanations.arithmetic(bundle, source, ids, "cross", layer - 1, head - 1, query)
    words = [w for token, w in zip(a.key_tokens, a.weights) if token != "<eos>"]
    assert sum(words) >= 0.5 and max(words) < 0.9  # spread over several words, not one or <eos>
