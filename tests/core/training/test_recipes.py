"""Named recipes (core/training/recipes.py): the lecture recipe resolves into a TrainConfig, the studio can list it,
and `train_cli.py train --recipe` trains with its options, those given on the command line winning."""
from __future__ import annotations

import json

import pytest

import cli.args
import train_cli
from core.training.recipes import LECTURE_MULTI30K, get_recipe, list_recipes
from core.training.trainer import TrainConfig


def test_the_lecture_recipe_is_a_train_config_for_a_gpu():
    config = get_recipe("lecture-multi30k").train_config()
    assert isinstance(config, TrainConfig)
    assert (config.amp, config.bucket, config.schedule) == ("bf16", 8, "inverse_sqrt")
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
    assert (args.max_tokens, args.preset, args.amp, args.bucket, args.readback_every) == (512, "small", "bf16", 8, 10)
    assert (args.lr, args.schedule, args.src, args.tgt) == (2e-3, "inverse_sqrt", "de", "en")
    assert args.data == LECTURE_MULTI30K.data
    by_epochs = cli.args.parse_arguments(["train", "--recipe", "lecture-multi30k", "--out", "x", "--epochs", "2"])
    assert (by_epochs.epochs, by_epochs.max_steps) == (2.0, None)


def test_an_unknown_recipe_on_the_command_line_names_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["train", "--recipe", "fast", "--out", "x"])
    assert "lecture-multi30k" in capsys.readouterr().err


def test_a_few_steps_of_the_recipe_train_on_the_cpu(tmp_path, capsys):
    """The recipe's path (bf16 autocast, bucketed grid batches, figures read back at the last step) with a tiny
    model on a few German-English pairs, standing in for Multi30k."""
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"ein hund {i} läuft\ta dog {i} runs\n" for i in range(200)))
    out = tmp_path / "run"
    assert train_cli.main(["train", "--recipe", "lecture-multi30k", "--data", f"files:{data}:de-en", "--preset", "tiny",
                           "--vocab-size", "300", "--tokenizer", "word", "--max-steps", "3", "--max-tokens", "256",
                           "--eval-every", "0", "--device", "cpu", "--out", str(out)]) == 0
    assert "amp bf16" in capsys.readouterr().out
    train = json.loads((out / "final" / "config.json").read_text())["train"]
    assert (train["bucket"], train["readback_every"], train["max_tokens"], train["peak_lr"]) == (8, 10, 256, 2e-3)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [3] and metrics[0]["loss"] > 0  # read back once, at the last step


def test_the_german_recipe_adds_multi30k_captions_to_tatoeba():
    args = cli.args.parse_arguments(["train", "--recipe", "tatoeba-de-en", "--out", "x"])
    assert args.data.endswith("deu-eng-full.tsv.gz:en-de") and args.also_train_on.endswith("multi30k")
    assert (args.src, args.tgt, args.both_directions, args.vocab_size, args.layers) == ("de", "en", True, 10000, 4)
    assert get_recipe("tatoeba-de-en").settings()["also_train_on"] == args.also_train_on
