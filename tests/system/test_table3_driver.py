"""Issue 42: bench/table3.py, the recipe of our own Table 3: its commands, its reading of evaluate's
output, and the CSV, markdown and plot it writes from the runs scored so far (the runs themselves take
hours, scheduled apart)."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import table3  # noqa: E402

import cli.args  # noqa: E402


def test_every_variants_command_parses_and_differs_from_base_by_its_options_only(tmp_path, monkeypatch):
    monkeypatch.setattr(table3, "RUNS", tmp_path)  # no run folders: new runs, not resumed ones
    parser = cli.args.build_parser()
    base = vars(parser.parse_args(table3.train_command(table3.VARIANTS[0], 1600)[2:]))
    for variant in table3.VARIANTS[1:]:
        args = vars(parser.parse_args(table3.train_command(variant, 1600)[2:]))
        changed = {k for k in args if args[k] != base[k]} - {"out"}
        assert changed and all(f"--{k.replace('_', '-')}" in variant.args for k in changed), variant
    assert base["max_steps"] == 1600 and base["eval_every"] == 0 and base["preset"] == "small"


def test_subsets_by_name_or_row():
    assert [v.name for v in table3.chosen("base,E-learned")] == ["base", "E-learned"]
    assert [v.name for v in table3.chosen("A")] == ["A-h1", "A-h16"]
    with pytest.raises(SystemExit, match="unknown variant"):
        table3.chosen("F")


def test_the_scores_are_read_from_evaluates_output():
    printed = ("final: 1014 sentences, beam 4, 20.1 s\nBLEU = 37.12   nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp\n"
               "chrF = 57.00   nrefs:1\ntoken accuracy = 61.25%   perplexity = 5.43   (teacher forced ...)\n")
    assert table3.parse_scores(printed) == {"bleu": 37.12, "accuracy": pytest.approx(0.6125), "perplexity": 5.43,
                                            "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp"}
    with pytest.raises(RuntimeError, match="evaluate printed no scores"):
        table3.parse_scores("BLEU = 1.0 x\n")


def test_scored_runs_become_the_csv_the_markdown_and_the_plot(tmp_path, monkeypatch):
    monkeypatch.setattr(table3, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(table3, "DOCS", tmp_path / "docs")
    for name, bleu, ppl in (("base", 36.0, 6.0), ("E-learned", 35.5, 6.1), ("pre-norm", 36.4, 5.9)):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "dev.json").write_text(json.dumps({
            "bleu": bleu, "bleu_signature": "nrefs:1", "accuracy": 0.6, "perplexity": ppl, "eval_s": 30.0,
            "step": 1600, "seed": 0, "parameters": 7_600_000, "train_s": 3600.0}))
    table3.write_results(table3.results())
    rows = list(csv.DictReader(open(tmp_path / "docs" / "table3.csv")))
    assert [r["name"] for r in rows] == ["base", "E-learned", "pre-norm"]
    assert (rows[1]["paper_perplexity"], rows[1]["paper_bleu"], rows[2]["paper_bleu"]) == ("4.92", "25.7", "")
    text = (tmp_path / "docs" / "table3-results.md").read_text()
    assert "| E-learned | E | learned positional embedding | 7.6M | 6.10 | 35.50 | 4.92 | 25.7 | 60 min |" in text
    assert (tmp_path / "docs" / "table3.png").read_bytes()[:4] == b"\x89PNG"


def test_a_new_run_leaves_its_folder_to_train_cli(tmp_path, monkeypatch):
    """train_cli refuses an --out that exists without checkpoints: the driver must not make it first."""
    monkeypatch.setattr(table3, "RUNS", tmp_path)
    seen = []

    def run(command, **kwargs):
        seen.append((command[2], (tmp_path / "base").exists()))
        raise SystemExit  # stop after the first command: only its moment matters

    monkeypatch.setattr(table3.subprocess, "run", run)
    with pytest.raises(SystemExit):
        table3.run_variant(table3.VARIANTS[0], 1600, 4096, {})
    assert seen == [("train", False)]


def test_a_score_kept_in_docs_spares_its_run_on_a_new_machine_unless_the_recipe_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(table3, "RUNS", tmp_path / "runs")  # a new machine: no run folders
    monkeypatch.setattr(table3, "DOCS", tmp_path / "docs")
    (tmp_path / "docs" / "table3-scores").mkdir(parents=True)
    (tmp_path / "docs" / "table3-scores" / "base.json").write_text(json.dumps({"step": 800, "max_tokens": 4096,
                                                                             "peak_scale": table3.PEAK_SCALE}))
    commands = []

    def run(command, **kwargs):
        commands.append(command[2])
        raise SystemExit

    monkeypatch.setattr(table3.subprocess, "run", run)
    table3.run_variant(table3.VARIANTS[0], 800, 4096, {})
    assert commands == []
    with pytest.raises(SystemExit):
        table3.run_variant(table3.VARIANTS[0], 1600, 4096, {})
    assert commands == ["train"]


def test_a_run_scored_here_is_kept_in_docs(tmp_path, monkeypatch):
    monkeypatch.setattr(table3, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(table3, "DOCS", tmp_path / "docs")
    (tmp_path / "runs" / "A-h1").mkdir(parents=True)
    (tmp_path / "runs" / "A-h1" / "dev.json").write_text(json.dumps({"step": 800, "bleu": 30.0}))
    assert table3.scores_of(table3.VARIANTS[2]) == {"step": 800, "bleu": 30.0}
    assert json.loads((tmp_path / "docs" / "table3-scores" / "A-h1.json").read_text())["bleu"] == 30.0


def test_a_runs_training_time_counts_the_steps_of_a_session_cut_off_before_it_was_resumed(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    logged = [(1, 1000, 500.0), (2, 1000, 500.0), (3, 900, 300.0),  # the first session, cut off after step 3
              (3, 900, 450.0), (4, 2000, 1000.0)]  # resumed from step 2's checkpoint: step 3 again
    metrics.write_text("\n".join(json.dumps({"step": s, "tokens": t, "tokens_per_s": r}) for s, t, r in logged))
    assert table3.steps_seconds(metrics) == pytest.approx(2 + 2 + 2 + 2)
