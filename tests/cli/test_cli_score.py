"""Issue 41 on the command line: `score` (fairseq's --score-reference) and translate's --prefix and
--print-alignment, on the shipped checkpoints, with the refusals of the other commands."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import core
import train_cli
from tests.helpers.shipped import SHIPPED

CAPTIONS = ["--checkpoint", str(SHIPPED)]  # the `shipped` fixture's model (the CLI's default is the general one)

SOURCES = ["Ein Hund läuft.", "Zwei junge Männer spielen Fußball.", ""]
REFERENCES = ["A dog runs.", "Two young men are playing soccer.", "Something."]


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    src, ref = tmp_path / "test.de", tmp_path / "test.en"
    src.write_text("\n".join(SOURCES) + "\n")
    ref.write_text("\n".join(REFERENCES) + "\n")
    return src, ref


def one_line_error(capsys, argv, *needles) -> None:
    """A refusal in one line (and argparse's pointer to --help when it names an option), exit code 2."""
    assert train_cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    first, *rest = err.splitlines()
    assert first.startswith(f"train_cli.py {argv[0]}: error: "), err
    assert rest in ([], [f"(`train_cli.py {argv[0]} --help` lists every option)"]), err
    for needle in needles:
        assert needle in err, err


def test_score_writes_a_tsv_row_per_pair(shipped, files, capsys):
    src, ref = files
    assert train_cli.main(["score", *CAPTIONS, "--source-file", str(src), "--reference-file", str(ref)]) == 0
    captured = capsys.readouterr()
    header, *rows = [line.split("\t") for line in captured.out.splitlines()]
    assert header == ["line", "logprob", "mean_logprob", "perplexity", "mean_rank", "tokens"] and len(rows) == 3
    expected = core.score(shipped, SOURCES, REFERENCES)
    for row, s in zip(rows[:2], expected):
        assert float(row[1]) == pytest.approx(s.sum, abs=1e-4) and float(row[3]) == pytest.approx(s.perplexity, 1e-4)
        assert float(row[4]) == pytest.approx(s.mean_rank, abs=0.01) and int(row[5]) == len(s.tokens)
    assert rows[2] == ["3", "nan", "nan", "nan", "nan", "0"]  # an empty source scores nothing
    assert f"note: {src} line 3: empty input" in captured.err
    assert "multi30k-de-en-small: 2 pairs, 12 tokens (<eos> included); mean log-prob per token" in captured.err


def test_score_writes_json_lines_with_each_token(shipped, files, tmp_path, capsys):
    src, ref = files
    out = tmp_path / "scores.jsonl"
    assert train_cli.main(["score", *CAPTIONS, "--source-file", str(src), "--reference-file", str(ref), "--format",
                           "jsonl", "--top-k", "2", "--limit", "2", "--output", str(out)]) == 0
    assert capsys.readouterr().out == ""
    records = [json.loads(line) for line in out.read_text().splitlines()]
    [expected, _] = core.score(shipped, SOURCES[:2], REFERENCES[:2], top_k=2)
    assert len(records) == 2 and records[0]["line"] == 1 and records[0]["tokens"] == expected.tokens
    assert records[0]["token_logprobs"] == pytest.approx(expected.token_logprobs, abs=1e-5)
    assert records[0]["ranks"] == expected.ranks and len(records[0]["alternatives"][0]) == 2
    assert records[0]["perplexity"] == pytest.approx(math.exp(-records[0]["mean_logprob"]))


def test_an_empty_source_is_null_in_json(files, capsys):
    src, ref = files
    assert train_cli.main(["score", "--source-file", str(src), "--reference-file", str(ref), "--format", "jsonl"]) == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["logprob"] is None and last["tokens"] == [] and last["notices"] == ["empty input"]
    assert "alternatives" not in last


def test_score_reads_a_corpus_split(multi30k, capsys):
    assert train_cli.main(["score", *CAPTIONS, "--data", f"files:{multi30k}", "--split", "test", "--limit", "4"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 5 and "scoring the test split" in captured.err


def test_score_refuses_as_evaluate_does(files, tmp_path, capsys):
    src, ref = files
    one_line_error(capsys, ["score", "--source-file", str(src)], "give --data (with --split) or both --source-file "
                                                                 "and --reference-file")
    one_line_error(capsys, ["score", "--data", "synthetic:copy", "--source-file", str(src), "--reference-file",
                            str(ref)], "not both")
    short = tmp_path / "short.en"
    short.write_text("A dog.\n")
    one_line_error(capsys, ["score", "--source-file", str(src), "--reference-file", str(short)],
                   f"{src} has 3 lines but {short} has 1")
    one_line_error(capsys, ["score", "--source-file", str(src), "--reference-file", str(ref), "--output", str(ref)],
                   "is the --reference-file file: writing it would destroy the input")
    with pytest.raises(SystemExit) as exit_info:  # argparse's own refusal, in the same style
        train_cli.main(["score", "--source-file", str(src), "--reference-file", str(ref), "--format", "csv"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("train_cli.py score: error: argument --format: invalid choice: 'csv'")
    assert src.read_text().splitlines() == SOURCES and ref.read_text().splitlines() == REFERENCES


def test_top_k_without_json_is_noted(files, capsys):
    src, ref = files
    assert train_cli.main(["score", "--source-file", str(src), "--reference-file", str(ref), "--top-k", "3"]) == 0
    assert "note: --top-k has no effect without --format jsonl; ignored" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["greedy", "beam", "sample"])
def test_translate_with_a_prefix(method, capsys):
    assert train_cli.main(["translate", "--method", method, "--seed", "1", "--prefix", "Two young",
                           "Ein Hund läuft.", "Zwei Männer spielen Fußball."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("Two young") for line in lines)


def test_a_prefix_the_model_cannot_write_is_refused_before_reading_stdin(capsys):
    one_line_error(capsys, ["translate", "--prefix", "Ææ"], "error: --prefix 'Ææ': this model's vocabulary cannot "
                                                             "write 'Æ', 'æ' (it would be forced as <unk>)")


def test_print_alignment_adds_fairseqs_pairs_in_a_column(shipped, capsys):
    assert train_cli.main(["translate", *CAPTIONS, "--method", "greedy", "--print-alignment",
                           "Zwei junge Männer spielen Fußball.", ""]) == 0
    first, empty = capsys.readouterr().out.splitlines()
    text, pairs = first.split("\t")
    [translation] = core.translate_detailed(shipped, [SOURCES[1]], method="greedy")
    assert text == translation.text
    assert pairs == " ".join(f"{s}-{t}" for s, t in core.alignment(shipped, SOURCES[1], translation.ids))
    assert [int(p.split("-")[1]) for p in pairs.split()] == list(range(len(translation.ids)))
    assert empty == "\t"


def test_print_alignment_follows_the_n_best_columns(capsys):
    assert train_cli.main(["translate", "--n-best", "2", "--print-alignment", "Ein Hund läuft."]) == 0
    cells = capsys.readouterr().out.rstrip("\n").split("\t")
    assert len(cells) == 5 and all("-" in pair for pair in cells[-1].split())
