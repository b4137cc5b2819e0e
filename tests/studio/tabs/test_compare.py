"""The Compare tab and /compare, called directly on tiny models: two models (of different vocabularies too)
on one sentence, the word diff, one colour scale for both attention maps, a corpus score that is core's, our
Table 3 from a CSV, and bad input answered in words."""
from __future__ import annotations

import csv
import html
import re

import gradio as gr
import numpy as np
import pytest

import core
from core.bundle import ModelBundle
from core.data.tokenizer import Tokenizer
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio.numbers import comparison
from studio.server.registry import ModelRegistry
from studio.tabs import compare as tab
from studio.text import word_diff
from tests.helpers.studio import SENTENCES, studio_bundle

A, B = "studio-tiny", "other-vocab"


def other_bundle() -> ModelBundle:
    """A second untrained model with a vocabulary of its own (characters, separate target side)."""
    source = Tokenizer.train(SENTENCES, vocab_size=64, kind="word", min_frequency=1)
    target = Tokenizer.train([s.lower() for s in SENTENCES], vocab_size=48, kind="word", min_frequency=1)
    config = ModelConfig.from_preset("tiny", src_vocab_size=source.vocab_size, tgt_vocab_size=target.vocab_size,
                                     shared_vocab=False, max_len=24, attention_bias=True, n_heads=2)
    return ModelBundle(Transformer(config).eval(), source, {"name": B}, separate_target=target)


@pytest.fixture(scope="module")
def registry() -> ModelRegistry:
    registry = ModelRegistry(None)
    registry.add(A, studio_bundle())
    registry.add(B, other_bundle())
    return registry


def text(markdown: str) -> str:
    """Markdown or HTML as it reads."""
    return html.unescape(re.sub(r"\\(.)", r"\1", re.sub(r"<[^>]+>", "", markdown)))


def test_two_models_with_different_vocabularies_on_one_sentence(registry):
    shown, probabilities, attention, layers, heads, notices, (a, b) = tab.run(
        registry, A, B, SENTENCES[0], "greedy", tab.LAST, tab.MEAN)
    for side, name in ((a, A), (b, B)):
        own = core.translate_detailed(registry.get(name), [SENTENCES[0]], comparison.DECODINGS["greedy"])[0]
        assert side.translation.text == own.text  # each decoded with its own tokenizers
        assert side.target_tokens[-1] == "<eos>" and len(side.target_tokens) == len(own.token_logprobs)
        assert html.escape(own.text, quote=False).split()[0] in shown
    for trace, side in zip(probabilities.data, (a, b)):
        assert list(trace.y) == pytest.approx(side.probabilities)
    assert a.cross.shape[1] != b.cross.shape[1]  # 4 heads against 2: the head picker offers the larger count
    assert heads.choices[-1][0] == str(max(a.cross.shape[1], b.cross.shape[1]))
    assert layers.choices[0][0] == tab.LAST and "Cannot" not in notices


def test_both_attention_maps_share_one_colour_scale(registry):
    sides = tab.run(registry, A, B, SENTENCES[1], "greedy", tab.LAST, tab.MEAN)[-1]
    figure = tab.attention_figure(sides, tab.LAST, tab.MEAN)
    maps = [np.asarray(t.z) for t in figure.data]
    assert maps[0] == pytest.approx(sides[0].cross[-1].mean(axis=0))
    assert figure.data[0].zmin == figure.data[1].zmin == 0
    assert figure.data[0].zmax == figure.data[1].zmax == pytest.approx(max(m.max() for m in maps))
    one_head = tab.attention_figure(sides, "1", "2")
    assert np.asarray(one_head.data[0].z) == pytest.approx(sides[0].cross[0, 1])
    assert "head 2 of" in one_head.layout.annotations[0].text
    # Past the smaller model's layers or heads: its last layer, its mean, and the title says so.
    assert "mean of its 2 heads" in tab.attention_figure(sides, tab.LAST, "4").layout.annotations[1].text


def test_the_word_diff_marks_what_only_one_translation_has():
    assert word_diff("a dog runs", "a cat runs") == [("equal", ["a"], ["a"]), ("replace", ["dog"], ["cat"]),
                                                         ("equal", ["runs"], ["runs"])]
    assert word_diff("", "x") == [("insert", [], ["x"])]


def test_the_same_model_twice_is_the_same_translation(registry):
    shown, *_, notices, (a, b) = tab.run(registry, A, A, SENTENCES[0], "beam 4", tab.LAST, tab.MEAN)
    assert a.translation.text == b.translation.text and "are the same" in shown and "<mark" not in shown


@pytest.mark.parametrize("names, sentence, said", [
    ((A, B), "   ", "the source sentence is empty"),
    ((A, "gone"), SENTENCES[0], "model B (gone) cannot be used: no model called 'gone'"),
    ((None, B), SENTENCES[0], "pick model A"),
])
def test_bad_input_is_answered_in_words(registry, names, sentence, said):
    out = tab.run(registry, *names, sentence, "greedy", tab.LAST, tab.MEAN)
    assert out[-2].startswith("**Cannot compare:**") and said in text(out[-2])
    assert all(isinstance(x, type(gr.skip())) for x in out[:5] + out[-1:])


def test_a_checkpoint_that_no_longer_loads_is_named(registry, tmp_path):
    broken = ModelRegistry(None)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    broken.add_folder(tmp_path / "broken")
    broken.add(A, studio_bundle())
    notice = tab.run(broken, A, "broken", SENTENCES[0], "greedy", tab.LAST, tab.MEAN)[-2]
    assert "model B (broken) cannot be used" in text(notice)


def test_a_corpus_score_is_cores_with_the_better_model_marked(registry, monkeypatch):
    pairs = [(s, s.lower()) for s in SENTENCES]
    monkeypatch.setattr(comparison, "corpus_pairs", lambda *a: (pairs, "3 test pairs", ("de", "en")))
    ticks = []
    table, notes = tab.score_corpus(registry, A, B, "Multi30k (de–en)", "valid", 3, "greedy",
                                    lambda done, **k: ticks.append(done))
    scores = [comparison.corpus_score(registry.get(name), pairs, "greedy") for name in (A, B)]
    forced = core.teacher_forced_metrics(registry.get(A), *zip(*pairs))
    assert scores[0]["perplexity"] == pytest.approx(forced.perplexity)
    assert f"{scores[0]['bleu']:.2f}" in table and f"{scores[1]['chrf']:.2f}" in table
    assert ticks[0] == (0, 6) and ticks[-1] == (6, 6)  # both models' sentences, counted
    for metric in ("bleu", "chrf", "accuracy"):
        winner = comparison.better(*scores, metric)
        cell = re.search(rf"{tab.METRIC_NAMES[metric].split(' (')[0]}.*?</tr>", table).group(0)
        assert (f"compare-better-{winner.lower()}" in cell) if winner else "compare-better" not in cell
    assert "different target vocabularies" in text(notes)  # so no perplexity is marked better
    assert "compare-better" not in re.search(r"perplexity.*?</tr>", table).group(0)


def test_corpus_pairs_follow_model_as_direction_and_cap_the_count():
    numbers = ModelBundle(studio_bundle().model, studio_bundle().tokenizer, {"src_lang": "en", "tgt_lang": "de"})
    pairs, described, langs = comparison.corpus_pairs("synthetic: numbers", "test", 10_000, numbers)
    assert len(pairs) == 100 and langs == ("en", "de") and described.startswith("the first 100 pairs")
    assert comparison.other_direction(ModelBundle(numbers.model, numbers.tokenizer,
                                                  {"src_lang": "de", "tgt_lang": "en"}), langs) == "de → en"
    for label, split, n, said in (("nope", "valid", 5, "unknown corpus"), ("synthetic: copy", "dev", 5,
                                  "unknown split"), ("synthetic: copy", "test", 0, "from 1 to")):
        with pytest.raises(comparison.Refused, match=said):
            comparison.corpus_pairs(label, split, n, numbers)


def test_a_bad_corpus_choice_is_answered_in_words(registry):
    table, notes = tab.score_corpus(registry, A, B, "synthetic: copy", "valid", None, "greedy", lambda *a, **k: None)
    assert "Cannot score" in notes and "from 1 to" in text(notes)


def test_our_table3_is_drawn_from_its_csv_or_a_note_points_at_the_recipe(tmp_path):
    path = tmp_path / "table3.csv"
    figure, note = tab.table3(path)
    assert figure is None and "docs/table3.md" in note
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, ["name", "row", "dev_perplexity", "dev_bleu", "paper_perplexity", "paper_bleu"])
        writer.writeheader()
        writer.writerows([{"name": "base", "row": "base", "dev_perplexity": 6.1, "dev_bleu": 35.2,
                           "paper_perplexity": 4.92, "paper_bleu": 25.8},
                          {"name": "base-seed1", "row": "base", "dev_perplexity": 6.3, "dev_bleu": 34.2,
                           "paper_perplexity": 4.92, "paper_bleu": 25.8},
                          {"name": "A-h1", "row": "A", "dev_perplexity": 7.1, "dev_bleu": 33.2,
                           "paper_perplexity": 5.29, "paper_bleu": 24.9},
                          {"name": "pre-norm", "row": "-", "dev_perplexity": 6.4, "dev_bleu": 34.0,
                           "paper_perplexity": "", "paper_bleu": ""}])
    figure, note = tab.table3(path)
    assert "4 runs scored" in note and "change from its own base" in note
    bars = {(t.name, t.xaxis): [round(v, 2) if v is not None else None for v in t.x] for t in figure.data}
    # Each variant drawn as its change from the base (the base itself is the zero line).
    assert bars[("ours (Multi30k dev)", "x")] == [-1.0, -2.0, -1.2]
    assert bars[("ours (Multi30k dev)", "x2")] == [0.2, 1.0, 0.3]
    assert bars[("paper (newstest2013 dev)", "x")] == [0.0, -0.9, None]
    # The noise band: as wide as the two base seeds differ, either side of zero, in each panel.
    bands = [(s.xref, round(s.x0, 2), round(s.x1, 2)) for s in figure.layout.shapes]
    assert bands == [("x", -1.0, 1.0), ("x2", -0.2, 0.2)]
    with open(path, "w", newline="") as f:  # variants scored, not yet their base: nothing to draw them against
        f.write("name,dev_bleu\nA-h1,33.2\n")
    figure, note = tab.table3(path)
    assert figure is None and "not yet the base" in note
    path.write_bytes(b"name,dev_bleu\n\xff\xfe,1\n")
    assert "Cannot show our Table 3" in tab.table3(path)[1]


def test_table3_rows_read_numbers_and_blanks(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,dev_bleu,paper_bleu\nbase,35.5,25.8\nE-learned,34,\n")
    rows = comparison.table3_rows(path)
    assert [(r["name"], r["dev_bleu"], r["paper_bleu"]) for r in rows] == [("base", 35.5, 25.8),
                                                                           ("E-learned", 34.0, None)]


def test_compare_endpoint_answers_json(registry):
    answer = tab.compare_api(registry, A, B, SENTENCES[0], "greedy", "synthetic: copy", "test", 3)
    assert answer["a"]["model"] == A and answer["b"]["translation"] == registry_translation(registry, B)
    assert len(answer["a"]["tokens"]) == len(answer["a"]["probabilities"])
    assert set(answer["scores"]["a"]) >= {"bleu", "chrf", "accuracy", "perplexity"}
    with pytest.raises(gr.Error, match="source sentence is empty"):
        tab.compare_api(registry, A, B, "", "greedy")


def registry_translation(registry, name):
    return core.translate_detailed(registry.get(name), [SENTENCES[0]], comparison.DECODINGS["greedy"])[0].text


def test_model_pickers_offer_every_model_and_start_on_two(registry):
    assert tab.defaults(registry, A) == (A, B) and tab.defaults(registry, None) == (A, B)
    only = ModelRegistry(None)
    only.add(A, studio_bundle())
    assert tab.defaults(only, A) == (A, A) and "Model B is model A itself" in tab.pairing_note(only, A, A)
    assert tab.pairing_note(registry, A, B) == ""
    a, b, note = tab.model_choices(registry, B, "removed")
    assert a.value == B and note == "" and b.value is None and [n for _, n in a.choices] == [A, B]
    assert tab.corpus_default(registry, "removed") == next(iter(comparison.CORPORA))
    assert tab.corpus_default(ModelRegistry(), "numbers-en-de-tiny") == "synthetic: numbers"


def test_model_b_is_of_model_as_language_pair():
    """The shipped models: a German captioner is never paired with an English number-words toy (issue 51); a
    two-way model's directions pair with nothing but themselves, each of its own pair."""
    shipped = ModelRegistry()
    a, b = tab.defaults(shipped, "multi30k-de-en-small")  # the general German model where shipped, else itself
    assert a == "multi30k-de-en-small" and b in ("tatoeba-de-en", a) and shipped.languages(b) == ("de", "en")
    registry = ModelRegistry(None)
    registry.add("de-en-a", studio_bundle())
    registry.add("de-en-b", studio_bundle())
    registry.add("en-de", other_bundle())
    for name, info in (("de-en-a", ("de", "en")), ("de-en-b", ("de", "en")), ("en-de", ("en", "de"))):
        registry.get(name).info.update(src_lang=info[0], tgt_lang=info[1])
    assert tab.defaults(registry, "de-en-b") == ("de-en-b", "de-en-a")
    a, b, note = tab.model_choices(registry, "de-en-a", "en-de")  # A picked anew: B follows it to A's pair
    assert (a.value, b.value, note) == ("de-en-a", "de-en-b", "")
    a, b, note = tab.model_choices(registry, "de-en-a", "en-de", follow=False)  # the tab again: B picked by hand stays
    assert (a.value, b.value) == ("de-en-a", "en-de") and "model B en→de: one sentence cannot be read" in note


def test_one_click_sets_the_caption_model_against_the_everyday_one_where_both_are_offered():
    caption, everyday, sentence = tab.DOMAIN_SHIFT
    registry = ModelRegistry(None)
    registry.add(caption, studio_bundle())
    assert tab.domain_shift(registry)[:3] == (gr.skip(),) * 3  # one of them only: nothing changes, and it says why
    assert everyday in tab.domain_shift(registry)[3]
    registry.add(everyday, studio_bundle())
    for name in (caption, everyday):
        registry.get(name).info.update(src_lang="de", tgt_lang="en")
    assert tab.domain_shift(registry) == (caption, everyday, sentence, "")
