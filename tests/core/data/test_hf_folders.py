"""Issue 42: Hugging Face data from disk. hf:PATH (or files:PATH) reads a save_to_disk folder or a folder of
parquet, jsonl or csv files with datasets' own readers; a dataset in the local cache is found with no
setting and no network; an unreadable folder is one line, and nothing is written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import core.data.huggingface
import train_cli
from core.data.files import absolute_spec, load_corpus
from core.data.huggingface import cached_datasets, find_cached
from tests.helpers.cli import one_line_error

QUICK = ["--preset", "tiny", "--tokenizer", "word", "--max-steps", "2", "--eval-every", "2", "--bleu-sentences", "3"]


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path, monkeypatch) -> Path:
    """datasets' cache in tmp_path: what load_dataset converts stays out of the user's cache."""
    import datasets

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    return cache


def rows(n: int, start: int = 0) -> list[dict]:
    return [{"de": f"Hund {i} läuft", "en": f"dog {i} runs"} for i in range(start, start + n)]


def test_a_save_to_disk_dataset_dict_trains_and_evaluates(tmp_path, capsys):
    import datasets

    translation = [{"translation": r} for r in rows(60)]
    datasets.DatasetDict(train=datasets.Dataset.from_list(translation[:50]),
                         validation=datasets.Dataset.from_list(translation[50:55]),
                         test=datasets.Dataset.from_list(translation[55:])).save_to_disk(tmp_path / "saved")
    out = tmp_path / "run"
    assert train_cli.main(["train", "--data", f"hf:{tmp_path / 'saved'}", *QUICK, "--out", str(out)]) == 0
    assert "de→en (inferred from the data; --src/--tgt choose), " in capsys.readouterr().out
    data = json.loads((out / "final" / "config.json").read_text())["data"]
    assert data["source"] == f"hf:{(tmp_path / 'saved').resolve()}" and data["counts"] == {"train": 50, "valid": 5,
                                                                                          "test": 5}
    assert train_cli.main(["evaluate", "--checkpoint", str(out / "final"), "--data", f"hf:{tmp_path / 'saved'}",
                           "--method", "greedy"]) == 0
    assert "run: 5 sentences" in capsys.readouterr().out


def test_a_saved_dataset_of_one_split_is_carved(tmp_path):
    import datasets

    datasets.Dataset.from_list(rows(300)).save_to_disk(tmp_path / "one")
    corpus = load_corpus(f"hf:{tmp_path / 'one'}", "en", "de", valid_fraction=0.1)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (267, 30, 3)
    assert corpus.train[0] == ("dog 0 runs", "Hund 0 läuft")


def test_a_folder_of_parquet_files_trains_by_its_split_names(tmp_path, capsys):
    import datasets

    folder = tmp_path / "parquet" / "data"
    folder.mkdir(parents=True)
    datasets.Dataset.from_list(rows(40)).to_parquet(folder / "train-00000-of-00002.parquet")
    datasets.Dataset.from_list(rows(40, 40)).to_parquet(folder / "train-00001-of-00002.parquet")
    datasets.Dataset.from_list(rows(6, 80)).to_parquet(folder / "validation-00000-of-00001.parquet")
    out = tmp_path / "run"
    assert train_cli.main(["train", "--data", f"files:{tmp_path / 'parquet'}", "--src", "en", *QUICK,
                           "--out", str(out)]) == 0
    assert "en→de, " in capsys.readouterr().out
    data = json.loads((out / "final" / "config.json").read_text())["data"]
    assert data["counts"] == {"train": 79, "valid": 6, "test": 1} and data["carved"] == {"seed": 0, "test": 1}


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_folders_of_jsonl_or_csv_files_load(tmp_path, suffix):
    import datasets

    for split, part in (("train", rows(30)), ("dev", rows(4, 30)), ("test", rows(3, 34))):
        table = datasets.Dataset.from_list(part)
        table.to_json(tmp_path / f"{split}.jsonl") if suffix == "jsonl" else table.to_csv(tmp_path / f"{split}.csv")
    corpus = load_corpus(f"hf:{tmp_path}", "de", "en")
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (30, 4, 3)
    assert corpus.valid[0] == ("Hund 30 läuft", "dog 30 runs")


def test_an_unreadable_dataset_folder_is_one_line_and_writes_nothing(tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dataset_dict.json").write_text("{")
    out = tmp_path / "never"
    one_line_error(capsys, ["train", "--data", f"hf:{broken}", "--out", str(out)],
                   "not a readable save_to_disk folder (JSONDecodeError")
    (tmp_path / "bad-parquet").mkdir()
    (tmp_path / "bad-parquet" / "train.parquet").write_text("not parquet")
    one_line_error(capsys, ["train", "--data", f"hf:{tmp_path / 'bad-parquet'}", "--out", str(out)],
                   "the parquet files cannot be read (ArrowInvalid")
    one_line_error(capsys, ["train", "--data", f"hf:{tmp_path / 'absent'}", "--out", str(out)], "no such folder")
    assert not out.exists()


def test_mixed_formats_and_folders_of_other_files_are_named(tmp_path):
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "train.csv").write_text("de,en\na,b\n")
    (tmp_path / "mixed" / "test.jsonl").write_text('{"de": "a", "en": "b"}\n')
    with pytest.raises(ValueError, match="holds files of several formats \\(csv, json\\); keep one"):
        load_corpus(f"hf:{tmp_path / 'mixed'}")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "notes.txt").write_text("hello\n")
    with pytest.raises(ValueError, match="not a Hugging Face dataset folder"):
        load_corpus(f"hf:{tmp_path / 'text'}")


def test_a_relative_dataset_path_is_made_absolute_for_the_runs_record(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saved").mkdir()
    assert absolute_spec("hf:./saved") == f"hf:{tmp_path / 'saved'}"
    assert absolute_spec("hf:bentrevett/multi30k") == "hf:bentrevett/multi30k"


def cache_dataset(cache: Path, tmp_path: Path, name: str, config: str | None = None) -> None:
    """What load_dataset leaves in the cache for the Hub dataset `name`: its splits as arrow files."""
    import datasets

    files = tmp_path / "files" / name
    files.mkdir(parents=True)
    datasets.Dataset.from_list(rows(120)).to_parquet(files / "train.parquet")
    datasets.Dataset.from_list(rows(5, 120)).to_parquet(files / "test.parquet")
    scratch = tmp_path / "scratch" / name
    datasets.load_dataset("parquet", data_dir=str(files), cache_dir=str(scratch))
    [info] = scratch.glob("parquet/*/*/*/dataset_info.json")
    record = json.loads(info.read_text())
    record["config_name"] = config or "default"
    info.write_text(json.dumps(record))
    entry = cache / name.replace("/", "___") / (config or "default")
    entry.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(info.parents[2], entry)  # CONFIG/VERSION/HASH/ with the arrow files


def test_a_cached_hub_dataset_is_listed_and_read_without_a_network(tmp_path, datasets_cache, monkeypatch):
    cache_dataset(datasets_cache, tmp_path, "someone/dog-pairs")
    cache_dataset(datasets_cache, tmp_path, "other/pairs", "de-en")
    listed = cached_datasets()
    assert [(d.spec, d.splits) for d in listed] == [("hf:other/pairs:de-en", ("train", "test")),
                                                    ("hf:someone/dog-pairs", ("train", "test"))]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # no setting: the cache is read as it is

    def no_network(timeout: float = 0.0) -> bool:
        raise AssertionError("a cached dataset must not ask the Hub")

    monkeypatch.setattr(core.data.huggingface, "hub_reachable", no_network)
    corpus = load_corpus("hf:someone/dog-pairs", "en", "de")
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (119, 1, 5)
    assert corpus.train[0] == ("dog 0 runs", "Hund 0 läuft")
    assert len(load_corpus("hf:other/pairs:de-en").test) == 5  # the config names the direction too
    assert find_cached("someone/dog-pairs", "fr-en") is None


def test_a_dataset_cached_in_several_configurations_needs_one_named(tmp_path, datasets_cache):
    cache_dataset(datasets_cache, tmp_path, "someone/pairs", "de-en")
    cache_dataset(datasets_cache, tmp_path / "again", "someone/pairs", "en-fr")
    with pytest.raises(ValueError, match="cached in several configurations \\(de-en, en-fr\\); name one: "
                                         "hf:someone/pairs:CONFIG"):
        load_corpus("hf:someone/pairs")


def test_a_dataset_neither_cached_nor_reachable_says_where_it_looked(monkeypatch, datasets_cache):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(core.data.huggingface, "hub_reachable", lambda timeout=0.0: False)
    with pytest.raises(ValueError, match=f"huggingface.co is unreachable and the local cache \\({datasets_cache}\\) "
                                         "holds no copy; .*hf:PATH"):
        load_corpus("hf:someone/not-cached")
