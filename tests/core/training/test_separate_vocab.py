"""Issue 42: separate vocabularies (section 3.4's note: the paper shares all three matrices because its
vocabulary is shared). A tokenizer per language: sources are read with the source's, targets encoded and
outputs written with the target's; checkpoints keep both; train_cli trains, saves, loads and translates."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

import train_cli
from core import ModelConfig, Transformer
from core.bundle import ModelBundle, new_bundle
from core.checkpoint import average_checkpoints, load_checkpoint, save_checkpoint
from core.data.batching import encode_pairs
from core.inference.stepwise_beam import BeamStepper
from core.inference.translation import translate_detailed
from core.training.evaluation import teacher_forced_metrics
from tests.helpers.cli import one_line_error

PAIRS = [(f"{a} {b}", f"{b.upper()} {a.upper()} !") for a in "abcdefgh" for b in "ijklmnop"]


@pytest.fixture(scope="module")
def bundle() -> ModelBundle:
    torch.manual_seed(0)
    return new_bundle(PAIRS, "tiny", vocab_size=64, tokenizer_kind="word", separate_vocab=True, max_len=16)


def test_each_side_has_its_own_vocabulary_and_only_the_target_matrices_are_tied(bundle):
    source, target = bundle.tokenizer, bundle.target_tokenizer
    assert source is not target and bundle.separate_target is target
    assert "a" in source.hf.get_vocab() and "A" not in source.hf.get_vocab() and "A" in target.hf.get_vocab()
    config, model = bundle.model.config, bundle.model
    assert not config.shared_vocab and (config.src_vocab_size, config.tgt_vocab_size) == (20, 21)
    assert model.src_embed is not model.tgt_embed and model.generator.weight is model.tgt_embed.weight


def test_targets_are_encoded_and_outputs_written_with_the_targets_tokenizer(bundle):
    [example], _ = encode_pairs([PAIRS[0]], bundle.tokenizer, 16, bundle.target_tokenizer)
    assert example.src[:-1] == bundle.tokenizer.encode("a i")
    assert example.tgt[1:-1] == bundle.target_tokenizer.encode("I A !") != bundle.tokenizer.encode("I A !")
    [result] = translate_detailed(bundle, ["a i"], method="greedy", min_len=3, max_len_b=5)  # untrained: say something
    assert result.text == bundle.target_tokenizer.decode(result.ids) and result.ids
    assert result.tokens == bundle.target_tokenizer.tokens(result.ids)
    assert result.source_tokens == bundle.tokenizer.tokens(bundle.tokenizer.encode("a i")) + ["<eos>"]
    stepper = BeamStepper(bundle, "a i", beam_size=2)  # the studio's step-by-step beam shows target tokens
    assert stepper.tokenizer is bundle.target_tokenizer
    forced = teacher_forced_metrics(bundle, ["a i"], ["I A !"])
    assert forced.tokens == 4 and forced.pairs == 1


def test_a_checkpoint_keeps_both_tokenizers(bundle, tmp_path):
    save_checkpoint(tmp_path / "ckpt", bundle)
    assert (tmp_path / "ckpt" / "target_tokenizer.json").is_file()
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.tokenizer.to_json() == bundle.tokenizer.to_json()
    assert loaded.target_tokenizer.to_json() == bundle.target_tokenizer.to_json()
    assert translate_detailed(loaded, ["b j"], method="greedy")[0].text == \
        translate_detailed(bundle, ["b j"], method="greedy")[0].text
    averaged = average_checkpoints([loaded, load_checkpoint(tmp_path / "ckpt")])
    assert averaged.target_tokenizer.to_json() == bundle.target_tokenizer.to_json()


def test_a_separate_vocabulary_model_without_its_target_tokenizer_is_refused(bundle, tmp_path):
    save_checkpoint(tmp_path / "ckpt", bundle)
    (tmp_path / "ckpt" / "target_tokenizer.json").unlink()  # one tokenizer file for two vocabularies
    with pytest.raises(ValueError, match="separate source and target vocabularies .* target_tokenizer.json is "
                                         "missing"):
        load_checkpoint(tmp_path / "ckpt")
    equal_sizes = ModelConfig.from_preset("tiny", src_vocab_size=20, tgt_vocab_size=20, shared_vocab=False)
    with pytest.raises(ValueError, match="the model's only tokenizer, but the model has separate source and target "
                                         "vocabularies .* it needs a target tokenizer too"):
        ModelBundle(Transformer(equal_sizes), bundle.tokenizer)


def test_a_shared_vocabulary_model_refuses_a_second_tokenizer(bundle, tmp_path):
    torch.manual_seed(0)
    shared = new_bundle(PAIRS, "tiny", vocab_size=64, tokenizer_kind="word")
    with pytest.raises(ValueError, match="shares one vocabulary between source and target"):
        ModelBundle(shared.model, shared.tokenizer, separate_target=shared.tokenizer)
    save_checkpoint(tmp_path / "shared", shared)
    shutil.copy(tmp_path / "shared" / "tokenizer.json", tmp_path / "shared" / "target_tokenizer.json")
    with pytest.raises(ValueError, match="target_tokenizer.json is a second tokenizer"):
        load_checkpoint(tmp_path / "shared")


def test_checkpoints_of_other_target_vocabularies_are_not_averaged(bundle):
    torch.manual_seed(0)
    other = new_bundle([(s, t + " ?") for s, t in PAIRS], "tiny", vocab_size=64, tokenizer_kind="word",
                       separate_vocab=True, max_len=16)
    with pytest.raises(ValueError, match="different model config|different tokenizer"):
        average_checkpoints([bundle, other])


def test_train_cli_trains_saves_loads_and_translates_with_separate_vocabularies(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_cli.main(["train", "--data", "synthetic:numbers", "--preset", "tiny", "--separate-vocab",
                           "--src-vocab-size", "30", "--max-steps", "8", "--max-tokens", "400", "--warmup", "4",
                           "--eval-every", "4", "--bleu-sentences", "4", "--limit", "300", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "vocabulary 30 source / 32 target" in printed
    final = out / "final"
    assert (final / "target_tokenizer.json").is_file()
    config = json.loads((final / "config.json").read_text())["model"]
    assert not config["shared_vocab"] and config["src_vocab_size"] == 30
    loaded = load_checkpoint(final)
    assert "zwanzig" in loaded.target_tokenizer.hf.get_vocab() and "zwanzig" not in loaded.tokenizer.hf.get_vocab()
    assert train_cli.main(["translate", "--checkpoint", str(final), "--method", "greedy", "4 2"]) == 0
    words = capsys.readouterr().out.split()
    assert all(word in loaded.target_tokenizer.hf.get_vocab() for word in words)
    assert train_cli.main(["evaluate", "--checkpoint", str(final), "--data", "synthetic:numbers", "--limit", "5",
                           "--method", "greedy"]) == 0
    assert "token accuracy = " in capsys.readouterr().out
    assert train_cli.main(["train", "--out", str(out), "--resume", "--max-steps", "9", "--eval-every", "0"]) == 0
    assert (out / "step-0000009" / "target_tokenizer.json").is_file()


def test_vocabulary_sizes_without_separate_vocabularies_are_refused(capsys, tmp_path):
    one_line_error(capsys, ["train", "--data", "synthetic:copy", "--tgt-vocab-size", "50",
                            "--out", str(tmp_path / "x")],
                   "--tgt-vocab-size sizes a separate vocabulary: add --separate-vocab")
    assert not (tmp_path / "x").exists()
