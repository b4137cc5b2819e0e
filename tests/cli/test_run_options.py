"""Issue 66: train's options as data. One parser a process; run.json read and written by cli/run_record.py
alone; --resume takes the run's options as defaults, says which came from the run, and keeps --also-train-on."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import cli.args
import cli.run_record
import train_cli

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--preset", "tiny", "--max-tokens", "512", "--warmup", "10", "--eval-every", "0", "--tokenizer", "word"]


def pairs(path: Path, words: str) -> str:
    """A TSV of 60 German-English pairs made of words, as a --data spec."""
    path.write_text("".join(f"{words} {i}\t{words.upper()} {i}\n" for i in range(60)))
    return f"files:{path}:de-en"


def test_a_run_and_its_resume_build_the_parser_once(tmp_path, monkeypatch):
    built = []
    build = cli.args.build_parser
    monkeypatch.setattr(cli.args, "build_parser", lambda: built.append(1) or build())
    cli.args.cli_parser.cache_clear()
    try:
        data = pairs(tmp_path / "a.tsv", "ein hund")
        # --lr with noam: its note reads the parser's defaults, as run.json's writer reads its options.
        assert train_cli.main(["train", "--data", data, *TINY, "--max-steps", "1", "--lr", "0.01",
                               "--out", str(tmp_path / "run")]) == 0
        assert train_cli.main(["train", "--out", str(tmp_path / "run"), "--resume", "--max-steps", "2"]) == 0
    finally:
        cli.args.cli_parser.cache_clear()
    assert len(built) == 1


def test_the_second_corpus_is_kept_on_resume(tmp_path, capsys):
    """The data's fingerprint covers --also-train-on's pairs: a resume that lost them would be refused."""
    data, extra = pairs(tmp_path / "a.tsv", "ein hund"), pairs(tmp_path / "b.tsv", "eine katze")
    out = tmp_path / "run"
    assert train_cli.main(["train", "--data", data, "--also-train-on", extra, *TINY, "--max-steps", "1",
                           "--out", str(out)]) == 0
    capsys.readouterr()
    args = cli.args.parse_arguments(["train", "--out", str(out), "--resume", "--max-steps", "2"])
    assert args.also_train_on == json.loads((out / "run.json").read_text())["also_train_on"]
    assert train_cli.main(["train", "--out", str(out), "--resume", "--max-steps", "2"]) == 0
    assert (out / "step-0000002").is_dir()


def test_from_run_names_the_runs_options_not_given_again(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"options": ["--data", "synthetic:copy", "--warmup", "7",
                                                               "--lr", "0.01", "--max-steps", "30"]}))
    resume = ["train", "--out", str(tmp_path), "--resume"]
    args = cli.args.parse_arguments(resume + ["--lr", "0.01", "--max-steps", "40"])
    assert (args.warmup, args.lr, args.max_steps) == (7, 0.01, 40)
    assert args.from_run == {"data", "warmup"}  # --lr given again, with the run's value: given, not the run's
    fresh = cli.args.parse_arguments(["train", "--data", "synthetic:copy", "--out", str(tmp_path / "new")])
    assert fresh.from_run == frozenset()


def test_only_run_record_names_run_json():
    naming = [path.name for path in sorted((ROOT / "cli").glob("*.py"))
              if any(isinstance(node, ast.Constant) and node.value == "run.json"
                     for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))]
    assert naming == ["run_record.py"]
    assert cli.run_record.RUN_RECORD == "run.json"
