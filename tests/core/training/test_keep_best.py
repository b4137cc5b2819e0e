"""Issue 42: runs that keep their best checkpoint by a validation metric (core/training/keep_best.py, asked by the
Trainer) and stop when patience runs out; train_cli's --keep-best and --patience, and their refusals."""
from __future__ import annotations

import json

import pytest

import train_cli
from core.checkpoint import load_checkpoint
from core.inference.translation import translate_detailed
from core.training.keep_best import BestKeeper, check_keep_best
from core.training.trainer import TrainConfig
from tests.helpers.cli import one_line_error, usage_error

QUICK = ["train", "--data", "synthetic:copy", "--preset", "tiny", "--max-tokens", "512", "--warmup", "10",
         "--lr-factor", "0.5", "--bleu-sentences", "5", "--limit", "200"]


def test_the_keeper_follows_the_metrics_direction_and_keeps_the_earlier_of_a_tie():
    bleu, loss = BestKeeper("bleu"), BestKeeper("loss", patience=2)
    assert [bleu.observe(step, {"bleu": b}) for step, b in ((1, 3.0), (2, 5.0), (3, 5.0), (4, 4.0))] == \
        [True, True, False, False]
    assert (bleu.best, bleu.best_step, bleu.since_best, bleu.exhausted) == (5.0, 2, 2, False)
    assert [loss.observe(step, {"val_loss": v}) for step, v in ((1, 3.0), (2, 2.0), (3, 2.5))] == [True, True, False]
    assert not loss.exhausted and loss.observe(4, {"val_loss": 2.0}) is False and loss.exhausted
    assert loss.describe() == "loss 2 at step 2" and loss.record() == {"metric": "loss", "value": 2.0, "step": 2}
    with pytest.raises(ValueError, match="the evaluation at step 5 has no bleu to keep the best by"):
        bleu.observe(5, {"val_loss": 1.0})


def test_a_resumed_keeper_goes_on_from_its_best_of_the_same_metric_only():
    keeper = BestKeeper("bleu", patience=3)
    keeper.observe(10, {"bleu": 7.0})
    keeper.observe(20, {"bleu": 6.0})
    again = BestKeeper("bleu", patience=5)
    again.load_state_dict(keeper.state_dict())
    assert (again.best, again.best_step, again.since_best, again.patience) == (7.0, 10, 1, 5)
    other = BestKeeper("loss")
    other.load_state_dict(keeper.state_dict())
    assert other.best is None


@pytest.mark.parametrize("settings, message", [
    (dict(keep_best="bleu", bleu_sentences=0), "keep_best bleu scores decoded validation sentences"),
    (dict(keep_best="loss", eval_every=0), "keep_best loss needs evaluations"),
    (dict(keep_best="bleu", patience=0), "patience must be >= 1"),
    (dict(patience=3), "patience counts evaluations without a better TrainConfig.keep_best"),
    (dict(keep_best="chrf"), "keep_best 'chrf'; allowed: bleu, loss, exact_match"),
])
def test_settings_that_never_measure_the_metric_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"eval_every": 10, **settings})


def test_exact_match_is_for_synthetic_tasks():
    check_keep_best("exact_match", None, eval_every=1, bleu_sentences=1, synthetic=True)
    with pytest.raises(ValueError, match="exact_match is for synthetic tasks"):
        check_keep_best("exact_match", None, eval_every=1, bleu_sentences=1, synthetic=False)


def test_the_trainer_marks_each_best_evaluation_and_keeps_it_across_a_resume():
    from tests.helpers.trainers import make_trainer

    trainer = make_trainer(steps=6, eval_every=2, keep_best="loss", bleu_sentences=0)
    events = []
    trainer.run(events.append)
    marked = [e.validation["best"] for e in events if e.validation]
    assert len(marked) == 3 and marked[0] and trainer.keeper.best_step in (2, 4, 6)
    assert trainer.bundle.info["best"]["step"] == trainer.keeper.best_step
    state = trainer.state_dict()
    resumed = make_trainer(steps=8, eval_every=2, keep_best="loss", bleu_sentences=0)
    resumed.load_state_dict(state)
    assert resumed.keeper.best == trainer.keeper.best


def test_a_learned_positions_run_keeps_its_best_checkpoint_which_loads_and_translates(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_cli.main(QUICK + ["--max-steps", "20", "--eval-every", "10", "--save-every", "20",
                                   "--positional", "learned", "--max-len", "64", "--keep-best", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "best checkpoint" in printed and "(best: saved in best/)" in printed
    config = json.loads((out / "best" / "config.json").read_text())
    assert config["model"]["positional"] == "learned" and config["best"]["metric"] == "bleu"
    assert config["best"]["step"] == config["step"] in (10, 20)
    assert not (out / "best" / "trainer.pt").exists()  # the weights alone; resuming starts from a step-N
    best = load_checkpoint(out / "best")
    assert best.model.positions.table.shape == (64, 64)
    assert len(translate_detailed(best, ["a b c", "q r s t"], method="greedy")) == 2
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["validation"]["best"] for r in records if "validation" in r][0] is True


def test_patience_stops_the_run_and_saves_the_step_it_stopped_at(tmp_path, capsys):
    out = tmp_path / "run"
    # Exact match stays 0 in a run this short: the first evaluation is the best, the next two bring nothing.
    assert train_cli.main(QUICK + ["--max-steps", "40", "--eval-every", "3", "--save-every", "100",
                                   "--keep-best", "exact_match", "--patience", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "stopped early at step 9: no better exact_match in 2 evaluations" in printed
    assert sorted(p.name for p in out.glob("step-*")) == ["step-0000009"]
    assert json.loads((out / "best" / "config.json").read_text())["best"] == {"metric": "exact_match", "value": 0.0,
                                                                              "step": 3}
    one_line_error(capsys, ["train", "--out", str(out), "--resume", "--max-steps", "50"],
                   "stopped early", "give a --patience larger than 2")
    assert train_cli.main(["train", "--out", str(out), "--resume", "--max-steps", "12", "--patience", "5"]) == 0


def test_patience_zero_and_metrics_the_run_never_measures_are_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "never"
    usage_error(capsys, QUICK + ["--keep-best", "--patience", "0", "--out", str(out)],
                "argument --patience: must be an integer >= 1")
    one_line_error(capsys, QUICK + ["--patience", "3", "--out", str(out)], "--patience counts evaluations without a "
                   "better --keep-best metric")
    one_line_error(capsys, QUICK + ["--keep-best", "--bleu-sentences", "0", "--out", str(out)],
                   "--keep-best bleu scores decoded validation sentences: --bleu-sentences must be >= 1")
    one_line_error(capsys, QUICK + ["--keep-best", "loss", "--eval-every", "0", "--out", str(out)],
                   "--keep-best loss needs evaluations: --eval-every must be >= 1")
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"w{i}\tv{i}\n" for i in range(50)))
    one_line_error(capsys, ["train", "--data", f"files:{tsv}", "--keep-best", "exact_match", "--out", str(out)],
                   "--keep-best exact_match is for synthetic tasks")
    usage_error(capsys, QUICK + ["--keep-best", "chrf", "--out", str(out)], "invalid choice: 'chrf'")
    assert not out.exists()
