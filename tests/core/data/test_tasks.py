"""core.data.tasks: the synthetic lecture tasks are deterministic, disjoint and correct."""
from __future__ import annotations

import datetime
import json
import random

import pytest

from core.data.files import load_corpus
from core.data.tasks import (
    DATE_FORMATS,
    TASKS,
    TOKENIZER_KIND,
    _draw,
    english_number,
    form_notice,
    german_number,
    iso_date,
    make_task,
)
from core.data.tokenizer import UNK_ID, Tokenizer

SMALL = dict(n_train=300, n_valid=40, n_test=40)


@pytest.mark.parametrize("name", list(TASKS))
def test_deterministic_per_seed(name):
    a, b = make_task(name, seed=1, **SMALL), make_task(name, seed=1, **SMALL)
    assert (a.train, a.valid, a.test) == (b.train, b.valid, b.test)
    assert make_task(name, seed=2, **SMALL).train != a.train
    assert a.description["counts"] == {"train": 300, "valid": 40, "test": 40}
    json.dumps(a.description)


@pytest.mark.parametrize("name", list(TASKS))
def test_splits_disjoint(name):
    c = make_task(name, seed=0)
    train, valid, test = ({src for src, _ in split} for split in (c.train, c.valid, c.test))
    assert not train & valid and not train & test and not valid & test
    # A held-out target never appears in train either: the same number or date in another form is held out.
    train_targets = {tgt for _, tgt in c.train}
    if name in ("numbers", "dates"):
        assert not train_targets & {tgt for _, tgt in c.valid + c.test}


@pytest.mark.parametrize("name", list(TASKS))
def test_word_tokenizer_covers_every_split(name):
    c = make_task(name, seed=0)
    tok = Tokenizer.train([s for pair in c.train for s in pair], 1000, TOKENIZER_KIND, min_frequency=1)
    assert tok.vocab_size < 100  # small vocabularies learn fast
    for src, tgt in c.valid + c.test:
        assert UNK_ID not in tok.encode(src) + tok.encode(tgt)
        assert tok.decode(tok.encode(tgt)) == tgt
    assert max(len(s.split()) for pair in c.train for s in pair) <= 12


def test_sequence_tasks():
    for src, tgt in make_task("copy", **SMALL).train:
        assert src == tgt and 3 <= len(src.split()) <= 10
    for src, tgt in make_task("reverse", **SMALL).train:
        assert tgt.split() == src.split()[::-1]
    for src, tgt in make_task("sort", **SMALL).train:
        assert tgt.split() == sorted(src.split())


@pytest.mark.parametrize("n, english, german, written", [
    (0, "zero", "null", "null"),
    (1, "one", "eins", "eins"),
    (16, "sixteen", "sechzehn", "sechzehn"),
    (17, "seventeen", "siebzehn", "siebzehn"),
    (21, "twenty - one", "ein und zwanzig", "einundzwanzig"),
    (30, "thirty", "dreißig", "dreißig"),
    (97, "ninety - seven", "sieben und neunzig", "siebenundneunzig"),
    (100, "one hundred", "ein hundert", "einhundert"),
    (101, "one hundred one", "ein hundert eins", "einhunderteins"),
    (111, "one hundred eleven", "ein hundert elf", "einhundertelf"),
    (321, "three hundred twenty - one", "drei hundert ein und zwanzig", "dreihunderteinundzwanzig"),
    (999, "nine hundred ninety - nine", "neun hundert neun und neunzig", "neunhundertneunundneunzig"),
])
def test_number_words(n, english, german, written):
    assert english_number(n) == english
    assert german_number(n) == german
    assert "".join(german_number(n).split()) == written


def test_numbers_task_pairs():
    forms = {german_number(n): {english_number(n), " ".join(str(n))} for n in range(1000)}
    c = make_task("numbers", seed=0)
    assert all(src in forms[tgt] for src, tgt in c.train + c.valid + c.test)
    assert any(src[0].isdigit() for src, _ in c.train) and any(src[0].isalpha() for src, _ in c.train)
    with pytest.raises(ValueError, match="0..999"):
        german_number(1000)


def test_dates():
    day = datetime.date(2021, 3, 5)  # a Friday
    assert iso_date(day) == "2 0 2 1 - 0 3 - 0 5"
    assert [f.write(day) for f in DATE_FORMATS] == [
        "March 5 , 2 0 2 1", "5 March 2 0 2 1", "Friday , 5 th of March 2 0 2 1", "2 0 2 1 Mar 5",
        "Friday March 5 th 2 0 2 1", "5 . 3 . 2 0 2 1"]
    assert DATE_FORMATS[2].write(datetime.date(1999, 12, 22)) == "Wednesday , 2 2 nd of December 1 9 9 9"
    c = make_task("dates", seed=0)
    used = set()
    for src, tgt in c.train:
        date = datetime.date.fromisoformat("".join(tgt.split()))
        forms = [f.write(date) for f in DATE_FORMATS]
        assert src in forms
        used.add(forms.index(src))
    assert used == set(range(len(DATE_FORMATS)))


def test_unknown_task_lists_tasks():
    with pytest.raises(ValueError, match="copy, reverse, sort, numbers, dates"):
        make_task("transpose")
    with pytest.raises(ValueError, match="n_train"):
        make_task("copy", n_train=-1)
    with pytest.raises(ValueError, match="ran out of distinct examples"):
        make_task("numbers", n_train=2000)


def test_a_sample_found_on_the_last_allowed_draw_counts():
    draws = []

    def only_the_last_draw_is_new(rng):
        draws.append(1)
        return ("new", "t", 1) if len(draws) == 10 * 1 + 1000 else ("seen", "t", 0)

    out, keys = _draw(only_the_last_draw_is_new, random.Random(0), 1, {"seen"}, set(), "train", "demo")
    assert out == [("new", "t")] and keys == {1}


def test_load_corpus_synthetic():
    c = load_corpus("synthetic:numbers", seed=3, limit=50)
    assert (c.src_lang, c.tgt_lang) == ("en", "de")
    assert len(c.train) == 50 and c.description["source"] == "synthetic:numbers"
    assert c.description["counts"]["train"] == 50 and c.description["train_before_limit"] == 1500
    with pytest.raises(ValueError, match="has the target language 'de', not 'fr'"):
        load_corpus("synthetic:numbers", tgt_lang="fr")


@pytest.mark.parametrize("name", list(TASKS))
def test_every_generated_source_is_of_its_tasks_form(name):
    corpus = make_task(name, seed=3)
    info = {"data": corpus.description}
    assert [src for src, _ in corpus.train + corpus.valid + corpus.test if form_notice(info, src)] == []


@pytest.mark.parametrize("name, text", [
    ("numbers", "forty two"), ("numbers", "42"), ("numbers", "one thousand"), ("copy", "abc"),
    ("sort", "a b"), ("dates", "March 5, 2021"), ("dates", "5 . 3 . 21"), ("dates", "2021-03-05"),
])
def test_a_source_not_of_the_tasks_form_gets_a_notice(name, text):
    # The numbers model turned "forty two" into a confident "zwei", and "42" into "null", unremarked.
    notice = form_notice({"data": {"source": f"synthetic:{name}"}}, text)
    assert notice.startswith(f"not in the form of the {name} task's sources")


def test_models_of_real_text_get_no_form_notice():
    assert form_notice({"data": {"source": "files:../shared/data/multi30k"}}, "forty two") is None
    assert form_notice({}, "forty two") is None and form_notice({"data": "odd"}, "x") is None
