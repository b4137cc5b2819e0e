"""core.data.files: loading Multi30k, TSV files, aligned file pairs and datasets; every bad input
raises with a message that names the file, line and what was expected."""
from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

import core.data.huggingface
from core.data.corpus import ParallelCorpus, carve_splits, dropped_empty_note
from core.data.files import load_corpus
from core.data.huggingface import corpus_from_dataset_dict, hub_reachable, load_hf

TATOEBA = Path(__file__).resolve().parents[4] / "shared" / "data" / "tatoeba-deu-eng" / "deu-eng.tsv.gz"


def write(path: Path, lines: list[str] | bytes) -> Path:
    data = lines if isinstance(lines, bytes) else "".join(f"{line}\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def make_folder(root: Path, sizes=(("train", 20), ("val", 3), ("test", 3)), langs=("de", "en"), gz=True) -> Path:
    for split, n in sizes:
        for lang in langs:
            lines = [f"{lang} {split} Satz {i} äöü" for i in range(n)]
            write(root / f"{split}.{lang}{'.gz' if gz else ''}", lines)
    return root


# ----- Multi30k (the shared copy) ---------------------------------------------------------
def test_multi30k(multi30k):
    c = load_corpus(f"files:{multi30k}")
    assert (c.src_lang, c.tgt_lang) == ("de", "en")
    assert (len(c.train), len(c.valid), len(c.test)) == (29000, 1014, 1000)
    assert c.description["counts"] == {"train": 29000, "valid": 1014, "test": 1000}
    assert c.description["test_set"] == "test_2016_flickr"
    assert c.description["dropped_empty"] == 0
    assert c.train[0][1].startswith("Two young, White males")
    json.dumps(c.description)
    reverse = load_corpus(f"files:{multi30k}", src_lang="en", limit=100, seed=1)
    assert (reverse.src_lang, reverse.tgt_lang) == ("en", "de") and len(reverse.train) == 100
    assert set(reverse.train) <= {(t, s) for s, t in c.train}


def test_tatoeba_direction():
    if not TATOEBA.exists():
        pytest.skip(f"{TATOEBA} is absent")
    en_de = load_corpus(f"files:{TATOEBA}:en-de")
    de_en = load_corpus(f"files:{TATOEBA}:en-de", "de", "en")
    assert (en_de.src_lang, de_en.src_lang) == ("en", "de")
    def everything(c):
        return sorted(c.train + c.valid + c.test)
    assert everything(de_en) == sorted((t, s) for s, t in everything(en_de))
    assert de_en.train[:2] == [("Geh.", "Go."), ("Hallo!", "Hi.")]
    assert (len(de_en.valid), len(de_en.test)) == (500, 500)  # 1% of 50,001
    train_sources = {s for s, _ in de_en.train}
    assert not train_sources & {s for s, _ in de_en.test}


# ----- folders --------------------------------------------------------------------------
def test_folder_with_dev_and_several_test_sets(tmp_path):
    make_folder(tmp_path, (("train", 20), ("dev", 4), ("test_2017", 2), ("test_2016", 3)), gz=False)
    (tmp_path / "README.md").write_text("ignored")
    c = load_corpus(f"files:{tmp_path}", tgt_lang="de")
    assert (c.src_lang, c.tgt_lang) == ("en", "de")
    assert (len(c.train), len(c.valid), len(c.test)) == (20, 4, 3)
    assert c.description["test_set"] == "test_2016" and c.description["other_test_sets"] == ["test_2017"]
    assert c.train[0] == ("en train Satz 0 äöü", "de train Satz 0 äöü")


def test_folder_language_errors(tmp_path):
    make_folder(tmp_path, langs=("de", "en", "fr"))
    with pytest.raises(ValueError, match=r"cannot infer.*\['de', 'en', 'fr'\]"):
        load_corpus(f"files:{tmp_path}")
    with pytest.raises(ValueError, match=r"src_lang='es' is not available; languages: \['de', 'en', 'fr'\]"):
        load_corpus(f"files:{tmp_path}", "es", "en")
    assert load_corpus(f"files:{tmp_path}", "fr", "de").train[0][0].startswith("fr ")


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere: no such file or folder"):
        load_corpus(f"files:{tmp_path / 'nowhere'}")
    (tmp_path / "folder.tsv").mkdir()
    with pytest.raises(ValueError, match="folder.tsv: a folder, not a file"):
        load_corpus(f"files:{tmp_path / 'folder.tsv'}:en-de")
    (tmp_path / "folder.tsv").rmdir()
    with pytest.raises(ValueError, match="A,B names two aligned plain-text files"):
        load_corpus(f"files:{tmp_path / 'a.tsv'},{tmp_path / 'b.tsv'}")
    with pytest.raises(ValueError, match="has the source language 'in', not 'de'; leave the source language unset"):
        load_corpus("synthetic:reverse", "de")
    with pytest.raises(FileNotFoundError, match=r"no train\.\{lang\}"):
        load_corpus(f"files:{tmp_path}")
    make_folder(tmp_path, (("train", 5), ("test", 2)))
    with pytest.raises(FileNotFoundError, match="no val files"):
        load_corpus(f"files:{tmp_path}")
    make_folder(tmp_path, (("val", 2),), langs=("de",))
    with pytest.raises(FileNotFoundError, match=r"val\.en\[\.gz\] is missing"):
        load_corpus(f"files:{tmp_path}")


def test_mismatched_line_counts(tmp_path):
    make_folder(tmp_path)
    write(tmp_path / "train.en.gz", [f"s{i}" for i in range(19)])
    with pytest.raises(ValueError, match="train.de.gz has 20 lines but train.en.gz has 19"):
        load_corpus(f"files:{tmp_path}")


def test_empty_lines_dropped_and_counted(tmp_path):
    make_folder(tmp_path)
    write(tmp_path / "train.de.gz", ["eins", "", "drei", "  ", "fünf"] + ["x"] * 15)
    write(tmp_path / "train.en.gz", ["one", "two", "", "four", "five"] + ["x"] * 15)
    c = load_corpus(f"files:{tmp_path}")
    assert c.train[:2] == [("eins", "one"), ("fünf", "five")]
    assert c.description["dropped_empty"] == 3
    assert c.description["dropped_empty_lines"] == {"train": [2, 3, 4]}


def test_invalid_utf8_names_file_and_line(tmp_path):
    make_folder(tmp_path)
    write(tmp_path / "val.en.gz", b"fine\nstill fine\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"val\.en\.gz line 3: invalid UTF-8"):
        load_corpus(f"files:{tmp_path}")


def test_windows_bom_line_endings_and_unicode_line_separator(tmp_path):
    # A byte-order mark, CRLF endings, and U+2028 inside a line (not a line break here).
    a = write(tmp_path / "a.txt", b"\xef\xbb\xbfeins\r\nzwei\xe2\x80\xa8drei\r\nvier\r\n")
    b = write(tmp_path / "b.txt", ["one", "two three", "four"])
    c = load_corpus(f"files:{a},{b}")
    everything = sorted(c.train + c.valid + c.test)
    assert everything == [("eins", "one"), ("vier", "four"), ("zwei\u2028drei", "two three")]


# ----- TSV and aligned pairs -----------------------------------------------------------
def test_example_sentences_are_distinct():
    corpus = ParallelCorpus([], [], [("Tom ate.", "a"), ("Go.", "b"), ("Tom ate.", "c"), ("Run.", "d")], "en", "de", {})
    assert corpus.examples() == ["Tom ate.", "Go.", "Run."] and corpus.examples(2) == ["Tom ate.", "Go."]


def test_tsv(tmp_path):
    lines = [f"house {i}\tHaus {i}\textra" for i in range(300)] + ["", "lonely\t "]
    path = write(tmp_path / "pairs.tsv.gz", lines)
    c = load_corpus(f"files:{path}")
    assert (c.src_lang, c.tgt_lang) == ("src", "tgt")
    assert (len(c.train), len(c.valid), len(c.test)) == (294, 3, 3)  # 1% each
    assert c.description["dropped_empty"] == 2 and c.description["dropped_empty_lines"] == {"all": [301, 302]}
    assert dropped_empty_note(c.description) == "2 pairs with an empty side were left out (lines 301, 302)"
    assert ("house 7", "Haus 7") in c.train + c.valid + c.test
    de_en = load_corpus(f"files:{path}:en-de", "de", "en")
    assert (de_en.src_lang, de_en.tgt_lang) == ("de", "en")
    assert ("Haus 7", "house 7") in de_en.train + de_en.valid + de_en.test
    assert load_corpus(f"files:{path}:en-de").src_lang == "en"  # columns in order by default
    with pytest.raises(ValueError, match=r"src_lang='fr' is not available; languages: \['en', 'de'\]"):
        load_corpus(f"files:{path}:en-de", "fr", "en")
    # Without column names, languages could only relabel the columns: refused, not guessed.
    with pytest.raises(ValueError, match=r"no language names.*files:PATH:LANG1-LANG2"):
        load_corpus(f"files:{path}", "de", "en")
    with pytest.raises(ValueError, match=r"a language is named twice \(en-en\)"):
        load_corpus(f"files:{path}:en-en")


def test_too_small_a_tsv_names_the_file_and_the_lines_dropped(tmp_path):
    path = write(tmp_path / "tiny.tsv", ["\t"] * 5 + ["one\tpair"])
    dropped = r"got 1 \(5 lines with an empty side dropped\)"
    with pytest.raises(ValueError, match=rf"tiny\.tsv: .*at least 3 pairs.*{dropped}"):
        load_corpus(f"files:{path}")


def test_tsv_short_lines_listed(tmp_path):
    lines = ["a\tb"] * 5 + ["no tab here", "a\tb", "nor here"] + ["a\tb"] * 3
    path = write(tmp_path / "bad.tsv", lines)
    with pytest.raises(ValueError, match=r"bad\.tsv line 6, 8: fewer than 2 tab-separated columns"):
        load_corpus(f"files:{path}")
    write(path, ["x"] * 12)
    with pytest.raises(ValueError, match=r"line 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more"):
        load_corpus(f"files:{path}")


def test_pair_of_files(tmp_path):
    a = write(tmp_path / "corpus.de", [f"Satz {i}" for i in range(10)])
    b = write(tmp_path / "corpus.en", [f"sentence {i}" for i in range(10)])
    c = load_corpus(f"files:{a},{b}", "de", "en", seed=4)
    assert (len(c.train), len(c.valid), len(c.test)) == (8, 1, 1)  # at least one each
    assert c.description["format"] == "pair"
    assert load_corpus(f"files:{a},{b}", "de", "en", seed=4).test == c.test
    write(b, ["only one"])
    with pytest.raises(ValueError, match="corpus.de has 10 lines but corpus.en has 1"):
        load_corpus(f"files:{a},{b}")
    with pytest.raises(FileNotFoundError, match="missing.en: no such file"):
        load_corpus(f"files:{a},{tmp_path / 'missing.en'}")


def test_files_spec_precedence(tmp_path, monkeypatch):
    # An existing path is taken whole, then :LANG1-LANG2, then A,B, then one missing path.
    from core.data.files import FilesSpec, parse_files_spec

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "home").mkdir()
    for name in ("odd.tsv:de-en", "p,q.tsv", "home/h.tsv"):
        write(tmp_path / name, ["x\ty"])
    assert parse_files_spec("corpus") == FilesSpec((Path("corpus"),)) and parse_files_spec("corpus").folder
    assert parse_files_spec("odd.tsv:de-en") == FilesSpec((Path("odd.tsv:de-en"),))
    assert parse_files_spec("p,q.tsv") == FilesSpec((Path("p,q.tsv"),))
    assert parse_files_spec("x.tsv:en-de") == FilesSpec((Path("x.tsv"),), ("en", "de"))  # x.tsv need not exist
    assert parse_files_spec("~/h.tsv:en-de") == FilesSpec((tmp_path / "home/h.tsv",), ("en", "de"))
    assert parse_files_spec("a.txt,b.tsv:de-en") == FilesSpec((Path("a.txt,b.tsv"),), ("de", "en"))
    assert parse_files_spec(" a.txt , ~/b.txt ") == FilesSpec((Path("a.txt"), tmp_path / "home/b.txt"))
    assert parse_files_spec(" missing.tsv") == FilesSpec((Path(" missing.tsv"),))  # what load_files reads
    assert parse_files_spec("corpus:de-en").folder is None  # a folder has no columns to name
    assert str(parse_files_spec("a.txt , b.txt")) == "a.txt,b.txt"
    assert str(parse_files_spec("x.tsv.gz:en-de")) == "x.tsv.gz:en-de"


def test_files_spec_precedence_when_loading(tmp_path, monkeypatch):
    from core.data.files import local_files

    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus:de-en").mkdir()
    make_folder(tmp_path / "corpus:de-en")  # taken whole, not as corpus with columns de-en
    assert load_corpus("files:corpus:de-en").description["format"] == "folder"
    assert local_files("corpus:de-en") == sorted(Path("corpus:de-en").iterdir())
    write(tmp_path / "p,q.tsv", [f"a {i}\tb {i}" for i in range(5)])  # a comma in an existing name
    assert load_corpus("files:p,q.tsv").description["format"] == "tsv"
    write(tmp_path / "a.txt", ["eins", "zwei", "drei"])
    write(tmp_path / "b.txt", ["one", "two", "three"])
    assert load_corpus("files:a.txt , b.txt").description["files"] == ["a.txt", "b.txt"]
    assert local_files("a.txt , b.txt") == [Path("a.txt"), Path("b.txt")]
    assert local_files("p,q.tsv:de-en") == [Path("p,q.tsv")]
    with pytest.raises(ValueError, match="A,B names two aligned plain-text files"):  # columns, then A,B
        load_corpus("files:a.txt,b.tsv:de-en")
    # A TSV on either side of a pair, or padded: its lines (source<TAB>target) were read as one side's text.
    write(tmp_path / "t.tsv", [f"a {i}\tb {i}" for i in range(5)])
    for pair in ("t.tsv,b.txt", "a.txt,t.tsv", "a.txt,t.tsv "):
        with pytest.raises(ValueError, match="A,B names two aligned plain-text files"):
            load_corpus(f"files:{pair}")
    with pytest.raises(ValueError, match=r"\(:LANG1-LANG2\) apply to \.tsv\[\.gz\] files only"):
        load_corpus("files:a.txt,b.txt:de-en")
    with pytest.raises(ValueError, match=r"files:a\.txt: expected a folder"):
        load_corpus("files:a.txt")


def test_carve_keeps_repeated_sources_together():
    pairs = [(f"source {i // 3}", f"target {i}") for i in range(3000)]  # each source three times
    train, valid, test = carve_splits(pairs, seed=0)
    assert len(train) + len(valid) + len(test) == 3000 and len(valid) == len(test) == 30
    train_sources = {s for s, _ in train}
    assert not train_sources & {s for s, _ in valid + test}
    with pytest.raises(ValueError, match="at least 3 pairs"):
        carve_splits(pairs[:2], seed=0)


def test_bad_specs(tmp_path):
    for spec in ("multi30k", "file:x", "synthetic:", "s3://bucket"):
        with pytest.raises(ValueError, match=r"synthetic:NAME, files:PATH .*, hf:NAME\[:CONFIG\]"):
            load_corpus(spec)
    with pytest.raises(ValueError, match="unknown synthetic task 'nope'; allowed: copy, reverse"):
        load_corpus("synthetic:nope")
    with pytest.raises(ValueError, match="a corpus spec must be a string"):
        load_corpus(None)
    # A local path given as hf: was reported as "huggingface.co is unreachable"; hf:PATH reads dataset
    # folders (tests/test_hf_folders.py), and a folder of split files is pointed to files:.
    (tmp_path / "m30k").mkdir()
    write(tmp_path / "m30k" / "train.de", ["a"])
    with pytest.raises(ValueError, match=f"not a Hugging Face dataset folder .*; read other local files with "
                                         f"files:{tmp_path / 'm30k'}"):
        load_corpus(f"hf:{tmp_path / 'm30k'}")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        load_corpus("synthetic:copy", limit=0)
    path = write(tmp_path / "plain.txt", ["a"])
    with pytest.raises(ValueError, match=r"expected a folder .* a \.tsv or \.tsv\.gz file, or two aligned files"):
        load_corpus(f"files:{path}")


# ----- Hugging Face datasets -------------------------------------------------------------
def _json_dataset(tmp_path: Path, splits: dict[str, list[dict]]):
    import datasets

    for split, rows in splits.items():
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return datasets.load_dataset("json", data_files={s: str(tmp_path / f"{s}.jsonl") for s in splits},
                                 cache_dir=str(tmp_path / "cache"))


def test_datasets_path_on_local_json(tmp_path):
    def row(i):
        return {"translation": {"de": f"Ein Hund läuft {i}.", "en": f"A dog runs {i}."}}
    blank = {"translation": {"de": " ", "en": "x"}}
    dd = _json_dataset(tmp_path, {"train": [row(i) for i in range(20)] + [blank],
                                  "validation": [row(i) for i in range(20, 24)],
                                  "test": [row(i) for i in range(24, 27)]})
    c = corpus_from_dataset_dict(dd, None, None, "hf:local")
    assert (c.src_lang, c.tgt_lang) == ("de", "en")
    assert (len(c.train), len(c.valid), len(c.test)) == (20, 4, 3)
    assert c.train[1] == ("Ein Hund läuft 1.", "A dog runs 1.") and c.description["dropped_empty"] == 1
    flipped = corpus_from_dataset_dict(dd, "en", "de", "hf:local")
    assert flipped.valid[0] == ("A dog runs 20.", "Ein Hund läuft 20.")
    with pytest.raises(ValueError, match=r"src_lang='fr' is not available; languages: \['de', 'en'\]"):
        corpus_from_dataset_dict(dd, "fr", "en", "hf:local")


def test_datasets_columns_per_language_and_train_only(tmp_path):
    # bentrevett/multi30k has "en" and "de" columns; opus_books has only a train split.
    dd = _json_dataset(tmp_path, {"train": [{"en": f"cat {i}", "de": f"Katze {i}"} for i in range(120)]})
    c = corpus_from_dataset_dict(dd, "en", "de", "hf:local", seed=1)
    assert (len(c.train), len(c.valid), len(c.test)) == (118, 1, 1)
    assert c.description["carved"]["seed"] == 1 and c.train[0] == ("cat 0", "Katze 0")


def test_datasets_with_one_held_out_split_keep_it_and_carve_the_other(tmp_path):
    """A test split but no validation (or the reverse): the official split stays whole and only the
    missing one is carved from train (both were carved, the official test set unused)."""
    def rows(name, n):
        return [{"en": f"{name} {i}", "de": f"{name}-de {i}"} for i in range(n)]
    (tmp_path / "t").mkdir(), (tmp_path / "v").mkdir()
    dd = _json_dataset(tmp_path / "t", {"train": rows("cat", 200), "test": rows("test", 7)})
    c = corpus_from_dataset_dict(dd, "en", "de", "hf:local", seed=1)
    assert [s for s, _ in c.test] == [f"test {i}" for i in range(7)]
    assert (len(c.train), len(c.valid)) == (198, 2) and all(s.startswith("cat") for s, _ in c.valid)
    assert c.description["carved"] == {"seed": 1, "valid": 2} and not set(c.valid) & set(c.train)
    dd = _json_dataset(tmp_path / "v", {"train": rows("cat", 200), "validation": rows("dev", 5)})
    c = corpus_from_dataset_dict(dd, "en", "de", "hf:local", seed=1)
    assert [s for s, _ in c.valid] == [f"dev {i}" for i in range(5)]
    assert c.description["carved"] == {"seed": 1, "test": 2}


def test_hf_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"hf:transformer-studio/no-such-dataset.*files:PATH"):
        load_corpus("hf:transformer-studio/no-such-dataset:de-en")
    assert time.monotonic() - start < 10


def test_hf_unreachable_fails_fast(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    def stalled(*args, **kwargs):  # a stalled network; the probe thread outlives the test, so end it cleanly
        time.sleep(30)
        raise OSError("timed out")

    monkeypatch.setattr(core.data.huggingface.urllib.request, "urlopen", stalled)
    monkeypatch.setattr(core.data.huggingface, "HUB_PROBE_S", 0.5)
    start = time.monotonic()
    assert not hub_reachable(timeout=0.5)
    with pytest.raises(ValueError, match=r"hf:opus_books:de-en: huggingface.co is unreachable.*files:PATH"):
        load_hf("opus_books", "de-en")
    assert time.monotonic() - start < 10


def test_absolute_spec_names_the_same_files_from_any_folder(tmp_path, monkeypatch):
    from core.data.files import absolute_spec

    (tmp_path / "c.tsv").write_text("x\ty\n")
    monkeypatch.chdir(tmp_path)
    assert absolute_spec("files:c.tsv") == f"files:{tmp_path / 'c.tsv'}"
    assert absolute_spec("files:c.tsv:de-en") == f"files:{tmp_path / 'c.tsv'}:de-en"
    assert absolute_spec("files:a.de, b.en") == f"files:{tmp_path / 'a.de'},{tmp_path / 'b.en'}"
    assert absolute_spec("files:.") == f"files:{tmp_path}"
    for spec in ("synthetic:copy", "hf:wmt14:de-en"):
        assert absolute_spec(spec) == spec
