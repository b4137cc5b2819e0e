"""One model for both directions (core/data/directions.py): sources tagged with their target language, splits
carved so that no sentence nor any translation of it lies on two sides, a tokenizer that reads the tag as one
token, and a bundle bound to one direction (ModelBundle.toward, core.translate's target_lang)."""
from __future__ import annotations

from pathlib import Path

import pytest

import core
from core.data.corpus import ParallelCorpus
from core.data.directions import both_directions, carve_linked, language_tag, linked_groups, tagged, untagged
from core.data.files import load_corpus
from core.data.tokenizer import Tokenizer
from core.training.prepare import RunPlan, read_corpus
from core.training.recipes import get_recipe
from tests.helpers.models import EN_ES_PAIRS as PAIRS
from tests.helpers.models import two_way_bundle

TATOEBA_DE = Path(__file__).resolve().parents[4] / "shared" / "data" / "tatoeba-deu-eng" / "deu-eng-full.tsv.gz"
MULTI30K = TATOEBA_DE.parents[1] / "multi30k"
TATOEBA_ES = Path(__file__).resolve().parents[4] / "shared" / "data" / "tatoeba-spa-eng" / "spa-eng.tsv.gz"


def test_tags_name_the_target_language_and_come_off_again():
    assert language_tag("es") == "<2es>" and tagged("Hi.", "es") == "<2es> Hi."
    assert untagged("<2en> Hola.") == "Hola." and untagged("<2> Hola.") == "<2> Hola." and untagged("Hi.") == "Hi."


def test_sentences_linked_by_a_translation_are_one_group():
    groups = sorted(sorted(g) for g in linked_groups(PAIRS))
    # Go./Ve./Vete./Go away. are linked through "Vete."; Hi./Hola./Hello! through "Hola.".
    assert groups == [[0, 1, 2], [3, 7], [4], [5], [6], [8]]


def test_no_sentence_of_either_side_is_in_two_splits():
    pairs = PAIRS * 1 + [(f"Sentence {i}.", f"Frase {i % 40}.") for i in range(300)]
    train, valid, test = carve_linked(pairs, seed=3, valid_fraction=0.1)
    assert len(train) + len(valid) + len(test) == len(pairs) and valid and test
    for side in (0, 1):
        seen = [{p[side] for p in split} for split in (train, valid, test)]
        assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])


def test_a_corpus_becomes_both_directions_interleaved_and_tagged():
    corpus = ParallelCorpus(PAIRS[:4], PAIRS[4:6], PAIRS[6:], "en", "es", {"source": "x"})
    both = both_directions(corpus)
    assert both.train[:2] == [("<2es> Go.", "Ve."), ("<2en> Ve.", "Go.")] and len(both.train) == 8
    assert both.description["directions"] == [["en", "es"], ["es", "en"]]
    assert both.valid[1] == ("<2en> ¡Corre!", "Run!")  # splits of its own are kept


def test_the_tag_is_one_token_before_the_subwords_and_text_says_it_once():
    tokenizer = Tokenizer.train([s for pair in PAIRS for s in pair] * 5, 120).add_language_tags(["<2en>", "<2es>"])
    tag = tokenizer.hf.token_to_id("<2es>")
    plain = tokenizer.encode("Hola.")
    assert tokenizer.encode("<2es> Hola.") == [tag] + plain
    bound = tokenizer.with_prefix("<2es>")
    assert bound.encode("Hola.") == [tag] + plain and bound.encode("<2es> Hola.") == [tag] + plain
    assert bound.base.encode("Hola.") == plain and bound.decode(bound.encode("Hola.")) == "<2es> Hola."
    assert bound.encode("<2en> Hola.") == [tag] + plain  # a typed tag gives way to the bound direction
    assert bound.encode("") == [] and bound.encode_batch(["", "Hola."]) == [[], [tag] + plain]
    with pytest.raises(ValueError, match="<2fr> is not a token"):
        tokenizer.with_prefix("<2fr>")


def test_a_bundle_is_bound_to_one_direction_by_its_tokenizer():
    bundle = two_way_bundle()
    assert bundle.directions == [("en", "es"), ("es", "en")]
    to_en = bundle.toward("en")
    assert to_en.model is bundle.model and (to_en.info["src_lang"], to_en.info["tgt_lang"]) == ("es", "en")
    assert to_en.info["examples"] == ["Hola."] and to_en.toward() is to_en
    assert to_en.tokenizer.tokens(to_en.tokenizer.encode("Hola."))[0] == "<2en>"
    assert to_en.target_tokenizer.encode("Hi.") == bundle.tokenizer.encode("Hi.")  # targets carry no tag
    assert bundle.toward().info["tgt_lang"] == "es"  # unbound: the first direction
    with pytest.raises(ValueError, match="translates into es, en, not 'de'"):
        bundle.toward("de")


def test_translate_and_score_take_the_target_language():
    bundle = two_way_bundle()
    detailed = core.translate_detailed(bundle, ["Hola."], target_lang="en", method="greedy", max_len_b=3)[0]
    assert detailed.source_tokens[0] == "<2en>"
    assert core.translate_detailed(bundle, ["Hi."], method="greedy", max_len_b=3)[0].source_tokens[0] == "<2es>"
    assert len(core.score(bundle, ["Hola."], ["Hi."], target_lang="en")[0].token_logprobs) >= 2
    with pytest.raises(ValueError, match="not 'fr'"):
        core.translate(bundle, ["Hi."], target_lang="fr")


@pytest.mark.skipif(not TATOEBA_ES.exists(), reason="needs ../shared/data/tatoeba-spa-eng")
def test_tatoeba_en_es_is_split_with_no_english_or_spanish_sentence_on_two_sides():
    corpus = both_directions(load_corpus(f"files:{TATOEBA_ES}:en-es", "en", "es"))
    english = [{untagged(s) if s.startswith("<2es>") else t for s, t in split}
               for split in (corpus.train, corpus.valid, corpus.test)]
    spanish = [{t if s.startswith("<2es>") else untagged(s) for s, t in split}
               for split in (corpus.train, corpus.valid, corpus.test)]
    for side in (english, spanish):
        assert not (side[0] & side[1] or side[0] & side[2] or side[1] & side[2])
    assert len(english[2]) > 500 and corpus.description["carved"]["by"].startswith("linked")


@pytest.mark.skipif(not (TATOEBA_DE.exists() and MULTI30K.is_dir()),
                    reason="needs ../shared/data/tatoeba-deu-eng and multi30k")
def test_the_german_recipe_puts_no_sentence_on_two_sides():
    """tatoeba-de-en's split as the run made it (Tatoeba carved by linked sentences, Multi30k's training captions
    added): no German and no English sentence of its validation or test split is anywhere else."""
    recipe = get_recipe("tatoeba-de-en")
    corpus = read_corpus(RunPlan(recipe.data, recipe.src_lang, recipe.tgt_lang, both_directions=True,
                                 also_train_on=recipe.also_train_on))
    splits = (corpus.train, corpus.valid, corpus.test)
    for tag in ("<2en>", "<2de>"):  # a side: the German sentences, then the English ones
        side = [{untagged(s) if s.startswith(tag) else t for s, t in split} for split in splits]
        assert not (side[0] & side[1] or side[0] & side[2] or side[1] & side[2])
    assert len(corpus.test) >= 2000 and corpus.description["added_training"][0]["pairs"] > 28000
