"""Training on two corpora (core/data/mixture.py): the first keeps its held-out splits, the second adds training
pairs only, none of which holds a held-out sentence, and both ways when the model translates both ways."""
from __future__ import annotations

import pytest

from core.data.corpus import ParallelCorpus
from core.data.directions import both_directions
from core.data.mixture import with_training_pairs
from core.training.prepare import RunPlan, read_corpus


def corpus(train, valid=(), test=(), src="de", tgt="en") -> ParallelCorpus:
    return ParallelCorpus(list(train), list(valid), list(test), src, tgt,
                          {"source": "x", "counts": {"train": len(train), "valid": len(valid), "test": len(test)}})


def test_added_pairs_join_training_and_held_out_sentences_are_left_out():
    first = corpus([("Hallo.", "Hello.")], valid=[("Ja.", "Yes.")], test=[("Nein.", "No.")])
    extra = corpus([("Ein Hund.", "A dog."), ("Ja.", "Yes indeed."), ("Klar.", "No.")])
    mixed = with_training_pairs(first, extra, both_directions=False)
    assert mixed.train == [("Hallo.", "Hello."), ("Ein Hund.", "A dog.")]
    assert (mixed.valid, mixed.test) == (first.valid, first.test)
    assert mixed.description["added_training"] == [{"source": "x", "pairs": 1, "left_out_as_held_out": 2}]
    assert mixed.description["counts"]["train"] == 2


def test_both_directions_tag_the_added_pairs_and_untag_the_held_out_ones():
    first = both_directions(corpus([("Hallo.", "Hello.")] * 3, valid=[("Ja.", "Yes.")], test=[("Nein.", "No.")]))
    mixed = with_training_pairs(first, corpus([("Ein Hund.", "A dog."), ("Ja.", "Sure.")]), both_directions=True)
    assert mixed.train[-2:] == [("<2en> Ein Hund.", "A dog."), ("<2de> A dog.", "Ein Hund.")]
    assert mixed.description["added_training"][0]["left_out_as_held_out"] == 1


def test_an_added_corpus_in_other_languages_is_refused():
    with pytest.raises(ValueError, match="reads en→de, not de→en"):
        with_training_pairs(corpus([("a", "b")]), corpus([("a", "b")], src="en", tgt="de"), both_directions=False)


def test_a_plan_reads_its_second_corpus(tmp_path):
    first = tmp_path / "a.tsv"
    first.write_text("".join(f"hello {i}\thallo {i}\n" for i in range(300)))
    (tmp_path / "b").mkdir()  # a folder of splits, as Multi30k's: its training pairs alone join
    for split, (en, de) in {"train": ("a dog", "ein Hund"), "val": ("a cat", "eine Katze"),
                            "test": ("a cow", "eine Kuh")}.items():
        (tmp_path / "b" / f"{split}.en").write_text(en + "\n")
        (tmp_path / "b" / f"{split}.de").write_text(de + "\n")
    plan = RunPlan(f"files:{first}:en-de", "de", "en", also_train_on=f"files:{tmp_path / 'b'}")
    read = read_corpus(plan)
    assert read.train[-1] == ("ein Hund", "a dog") and len(read.train) == len(read_corpus(
        RunPlan(f"files:{first}:en-de", "de", "en")).train) + 1
