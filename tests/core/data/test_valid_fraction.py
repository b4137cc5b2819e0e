"""Issue 42: --valid-fraction, the share of a corpus without a validation split held out for validation
(seed 002 splits 90/10); by default 1% (at least 1, at most 1000), as before. evaluate carves a
checkpoint's test split again with the share its run used, so it scores no pair the model trained on."""
from __future__ import annotations

import json

import pytest

import train_cli
from core.data.corpus import carve_splits, held_out_size
from core.data.files import load_corpus
from core.data.huggingface import corpus_from_dataset_dict
from core.training.prepare import RunPlan, read_corpus
from tests.helpers.cli import one_line_error, usage_error


def tsv(tmp_path, n: int = 2000):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"house {i}\tHaus {i}\n" for i in range(n)))
    return path


def test_held_out_sizes():
    assert [held_out_size(n) for n in (5, 100, 5000, 10**6)] == [1, 1, 50, 1000]
    assert [held_out_size(n, 0.1) for n in (5, 100, 10**6)] == [1, 10, 100_000]  # a share asked for has no cap


def test_carve_splits_gives_valid_its_share_and_test_the_default():
    pairs = [(f"s{i}", f"t{i}") for i in range(1000)]
    train, valid, test = carve_splits(pairs, seed=0, shares=(0.1, None))
    assert (len(train), len(valid), len(test)) == (890, 100, 10)
    assert not {s for s, _ in valid} & {s for s, _ in train + test}
    assert carve_splits(pairs, seed=0) == carve_splits(pairs, seed=0, shares=(None, None))


def test_a_tsv_corpus_takes_the_share_and_records_it(tmp_path):
    corpus = load_corpus(f"files:{tsv(tmp_path)}:en-de", valid_fraction=0.1, seed=3)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (1780, 200, 20)
    assert corpus.description["carved"] == {"seed": 3, "valid": 200, "test": 20, "valid_fraction": 0.1}
    default = load_corpus(f"files:{tsv(tmp_path)}:en-de", seed=3)
    assert (len(default.valid), len(default.test)) == (20, 20) and "valid_fraction" not in default.description["carved"]


def test_a_dataset_without_a_validation_split_takes_the_share_and_keeps_its_test(tmp_path):
    import datasets

    rows = [{"en": f"cat {i}", "de": f"Katze {i}"} for i in range(200)]
    dd = datasets.DatasetDict(train=datasets.Dataset.from_list(rows), test=datasets.Dataset.from_list(rows[:7]))
    corpus = corpus_from_dataset_dict(dd, "en", "de", "hf:local", seed=1, valid_fraction=0.25)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (150, 50, 7)
    assert corpus.description["carved"] == {"seed": 1, "valid": 50, "valid_fraction": 0.25}


def test_a_corpus_with_its_own_validation_split_keeps_it(multi30k):
    corpus = read_corpus(RunPlan(f"files:{multi30k}", valid_fraction=0.1))
    assert len(corpus.valid) == 1014 and "carved" not in corpus.description


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, True, "0.1"])
def test_shares_outside_zero_to_one_are_refused(bad, tmp_path):
    with pytest.raises(ValueError, match="valid_fraction must be a number between 0 and 1"):
        load_corpus(f"files:{tsv(tmp_path, 20)}", valid_fraction=bad)


def test_train_cli_carves_the_share_and_evaluate_scores_the_test_split_beside_it(tmp_path, capsys):
    data, out = tsv(tmp_path), tmp_path / "run"
    assert train_cli.main(["train", "--data", f"files:{data}:en-de", "--valid-fraction", "0.1", "--seed", "2",
                           "--preset", "tiny", "--tokenizer", "word", "--max-steps", "2", "--eval-every", "0",
                           "--out", str(out)]) == 0
    assert "1780 training pairs" in capsys.readouterr().out
    record = json.loads((out / "final" / "config.json").read_text())["data"]
    assert record["carved"]["valid_fraction"] == 0.1
    assert train_cli.main(["evaluate", "--checkpoint", str(out / "final"), "--data", f"files:{data}:en-de",
                           "--method", "greedy"]) == 0
    captured = capsys.readouterr()
    assert "run: 20 sentences" in captured.out and "so none of them was trained on" in captured.err
    trained = {s for s, _ in load_corpus(f"files:{data}:en-de", seed=2, valid_fraction=0.1).train}
    test = load_corpus(f"files:{data}:en-de", seed=2, valid_fraction=0.1).test
    assert not {s for s, _ in test} & trained
    one_line_error(capsys, ["train", "--out", str(out), "--resume", "--max-steps", "3", "--valid-fraction", "0.2"],
                   "--valid-fraction 0.2 (the run's: 0.1)")


def test_the_option_is_noted_where_it_does_nothing_and_refused_out_of_range(tmp_path, capsys):
    assert train_cli.main(["train", "--data", "synthetic:copy", "--valid-fraction", "0.1", "--preset", "tiny",
                           "--max-steps", "1", "--eval-every", "0", "--limit", "50", "--out", str(tmp_path / "r")]) == 0
    assert "note: --valid-fraction has no effect: synthetic:copy has a validation split of its own" in \
        capsys.readouterr().err
    usage_error(capsys, ["train", "--data", "synthetic:copy", "--valid-fraction", "1", "--out", str(tmp_path / "x")],
                "argument --valid-fraction: must be a number between 0 and 1")
