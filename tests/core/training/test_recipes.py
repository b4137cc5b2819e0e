"""Named recipes (core/training/recipes.py): the lecture recipe resolves into a TrainConfig, the studio can list it,
and `train_cli.py train --recipe` trains with its options, those given on the command line winning."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import cli.args
import cli.train
import train_cli
from core.training import acceleration
from core.training.recipes import LECTURE_MULTI30K, RECIPES, get_recipe, list_recipes
from core.training.trainer import TrainConfig


def test_the_lecture_recipe_is_a_train_config_for_a_gpu():
    config = get_recipe("lecture-multi30k").train_config()
    assert isinstance(config, TrainConfig)
    assert (config.amp, config.bucket, config.schedule) == ("auto", 8, "inverse_sqrt")  # bf16 where it is native
    assert config.readback_every > 1 and config.eval_every and config.warmup < config.max_steps
    assert get_recipe("lecture-multi30k").train_config(max_steps=3).max_steps == 3
    with pytest.raises(ValueError, match=r"unknown TrainConfig field\(s\) \['max_step'\]"):
        LECTURE_MULTI30K.train_config(max_step=3)


def test_an_unknown_recipe_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown recipe 'lecture'; known recipes: lecture-multi30k"):
        get_recipe("lecture")


def test_recipes_are_listed_for_the_studio():
    listed = {recipe["name"]: recipe for recipe in list_recipes()}
    assert list(listed) == ["lecture-multi30k", "tatoeba-en-es", "tatoeba-es-en", "tatoeba-de-en"]
    lecture = listed["lecture-multi30k"]
    assert lecture["name"] == "lecture-multi30k" and "Multi30k De→En" in lecture["description"]
    settings = lecture["settings"]
    assert settings["preset"] == "small" and settings["max_tokens"] == 12288 and settings["data"].endswith("multi30k")
    assert settings["attention_every"] > 0
    settings["max_tokens"] = 1  # a copy: the recipe itself is shared
    assert LECTURE_MULTI30K.train["max_tokens"] == 12288


def test_the_recipe_stands_for_options_that_given_ones_override():
    args = cli.args.parse_arguments(["train", "--recipe", "lecture-multi30k", "--out", "x", "--max-tokens", "512"])
    assert (args.max_tokens, args.preset, args.amp, args.bucket, args.readback_every) == (512, "small", "auto", 8, 10)
    assert (args.lr, args.schedule, args.src, args.tgt) == (2e-3, "inverse_sqrt", "de", "en")
    assert args.data == LECTURE_MULTI30K.data
    by_epochs = cli.args.parse_arguments(["train", "--recipe", "lecture-multi30k", "--out", "x", "--epochs", "2"])
    assert (by_epochs.epochs, by_epochs.max_steps) == (2.0, None)


def test_an_unknown_recipe_on_the_command_line_names_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["train", "--recipe", "fast", "--out", "x"])
    assert "lecture-multi30k" in capsys.readouterr().err


def tiny_lecture(data: Path, out: Path, *options: str) -> list[str]:
    """The lecture recipe, with a tiny model on a few German-English pairs standing in for Multi30k."""
    data.write_text("".join(f"ein hund {i} läuft\ta dog {i} runs\n" for i in range(200)))
    return ["train", "--recipe", "lecture-multi30k", "--data", f"files:{data}:de-en", "--preset", "tiny",
            "--vocab-size", "300", "--tokenizer", "word", "--max-steps", "3", "--max-tokens", "256",
            "--eval-every", "0", "--device", "cpu", *options, "--out", str(out)]


def test_a_few_steps_of_the_recipe_train_on_the_cpu(tmp_path, capsys):
    """The recipe's path on a GPU (bf16 autocast, bucketed grid batches, figures read back at the last step)."""
    out = tmp_path / "run"
    assert train_cli.main(tiny_lecture(tmp_path / "pairs.tsv", out, "--amp", "bf16")) == 0
    captured = capsys.readouterr()
    assert "amp bf16" in captured.out
    assert "note: the lecture-multi30k recipe is sized for a GPU (aimed at 3 min on one H100" in captured.err
    train = json.loads((out / "final" / "config.json").read_text())["train"]
    assert (train["bucket"], train["readback_every"], train["max_tokens"], train["peak_lr"]) == (8, 10, 256, 2e-3)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [3] and metrics[0]["loss"] > 0  # read back once, at the last step


def test_on_a_cpu_without_native_bf16_the_recipe_trains_in_fp32_and_bf16_asked_for_is_noted(tmp_path, capsys,
                                                                                            monkeypatch):
    """An AVX2-only CPU: emulated bf16 measured 5.3x slower than fp32 there (200 s a step of the recipe)."""
    monkeypatch.setattr(acceleration, "native_bf16_cpu", lambda: False)
    monkeypatch.setattr(cli.train, "native_bf16_cpu", lambda: False)
    assert train_cli.main(tiny_lecture(tmp_path / "pairs.tsv", tmp_path / "auto")) == 0
    captured = capsys.readouterr()
    assert "amp off" in captured.out and "emulated" not in captured.err
    assert train_cli.main(tiny_lecture(tmp_path / "pairs.tsv", tmp_path / "bf16", "--amp", "bf16")) == 0
    assert "note: --amp bf16 is emulated on this CPU" in capsys.readouterr().err


def test_every_recipe_leaves_its_precision_to_amp_auto():
    assert all("amp" not in recipe.train for recipe in RECIPES.values())


def test_the_german_recipe_adds_multi30k_captions_to_tatoeba():
    args = cli.args.parse_arguments(["train", "--recipe", "tatoeba-de-en", "--out", "x"])
    assert args.data.endswith("deu-eng-full.tsv.gz:en-de") and args.also_train_on.endswith("multi30k")
    assert (args.src, args.tgt, args.both_directions, args.vocab_size, args.layers) == ("de", "en", True, 10000, 4)
    assert get_recipe("tatoeba-de-en").settings()["also_train_on"] == args.also_train_on
