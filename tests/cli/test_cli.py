"""Issue 5: train_cli.py end to end on a synthetic task, and its refusals."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
import cli.args
import cli.common
import cli.decode
import cli.files
import cli.loop
import cli.resume
import cli.train
import core
import train_cli
from core.training.prepare import RunPlan
from tests.helpers.cli import one_line_error, usage_error

TRAIN = ["train", "--data", "synthetic:copy", "--preset", "tiny", "--max-steps", "30", "--max-tokens", "512",
         "--warmup", "10", "--lr-factor", "0.5", "--eval-every", "15", "--save-every", "10", "--keep-last", "3",
         "--bleu-sentences", "10", "--limit", "500"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "run"
    assert train_cli.main(TRAIN + ["--out", str(out)]) == 0
    return out


def test_a_warmup_longer_than_the_run_is_noted(capsys, tmp_path):
    assert train_cli.main(TRAIN[:5] + ["--max-steps", "2", "--warmup", "40", "--eval-every", "0", "--limit", "50",
                                       "--out", str(tmp_path / "run")]) == 0
    assert "--warmup 40 is longer than the run (2 steps)" in capsys.readouterr().err
    # A resume refused (the run is done) says only why, not the run's warm-up again first.
    assert train_cli.main(["train", "--out", str(tmp_path / "run"), "--resume"]) != 0
    err = capsys.readouterr().err
    assert "already at step 2" in err and "--warmup" not in err


def test_the_direction_is_named_and_unnamed_languages_and_a_tiny_token_budget_are_noted(capsys, tmp_path):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"w{i} x\ty{i} z\n" for i in range(300)))
    quick = ["--preset", "tiny", "--max-steps", "1", "--eval-every", "0", "--tokenizer", "word"]
    assert train_cli.main(["train", "--data", f"files:{data}", *quick, "--max-tokens", "2",
                           "--out", str(tmp_path / "b")]) == 0
    captured = capsys.readouterr()
    assert "the data names no languages, so the checkpoint calls them src and tgt" in captured.err
    assert "294 of 294 training pairs are longer than --max-tokens 2 tokens" in captured.err
    assert "src→tgt, " in captured.out
    assert train_cli.main(["train", "--data", f"files:{data}:en-de", *quick, "--out", str(tmp_path / "c")]) == 0
    captured = capsys.readouterr()
    assert "en→de (inferred from the data; --src/--tgt choose), " in captured.out
    assert "names no languages" not in captured.err and "--max-tokens" not in captured.err


def test_a_vocabulary_too_small_for_the_data_is_noted(capsys, tmp_path):
    assert train_cli.main(TRAIN[:5] + ["--max-steps", "1", "--eval-every", "0", "--limit", "50", "--vocab-size", "5",
                                       "--out", str(tmp_path / "run")]) == 0
    assert "% of the training tokens are <unk>: a vocabulary of 5 (word)" in capsys.readouterr().err
    assert train_cli.main(TRAIN[:5] + ["--max-steps", "1", "--eval-every", "0", "--limit", "50",
                                       "--out", str(tmp_path / "enough")]) == 0
    assert "<unk>" not in capsys.readouterr().err


def test_train_writes_checkpoints_metrics_and_final(run):
    steps = sorted(p.name for p in run.glob("step-*"))
    assert steps == ["step-0000010", "step-0000020", "step-0000030"]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 31))
    assert "bleu" in records[14]["validation"] and records[-1]["loss"] < records[0]["loss"]
    assert (run / "final" / "model.safetensors").exists()


def test_evaluate_prints_bleu_and_signature(run, capsys):
    assert train_cli.main(["evaluate", "--checkpoint", str(run / "final"), "--data", "synthetic:copy",
                           "--split", "test", "--limit", "20", "--method", "greedy"]) == 0
    out = capsys.readouterr().out
    [bleu] = [line for line in out.splitlines() if line.startswith("BLEU = ")]
    [chrf] = [line for line in out.splitlines() if line.startswith("chrF = ")]
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in bleu and "nc:6|nw:0" in chrf  # each with its signature
    # Seed 004's metrics beside them: the references read under teacher forcing, no decoding.
    [forced] = [line for line in out.splitlines() if line.startswith("token accuracy = ")]
    assert re.fullmatch(r"token accuracy = \d+\.\d\d%   perplexity = \d+\.\d\d   \(teacher forced on the "
                        r"references: \d+ tokens, <eos> included\)", forced), forced


def test_translate_stdin_to_stdout(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("a b c\n\nq r s t\n"))
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--beam", "2"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3  # one line out per line in, the empty one included
    assert "empty" in captured.err


def test_translate_sentences_given_as_arguments(run, capsys, tmp_path):
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--method", "greedy", "a b c", ""]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2 and "note: argument 2: " in captured.err
    (tmp_path / "in.txt").write_text("a b c\n")
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final"), "--input", str(tmp_path / "in.txt"),
                            "a b c"], "as arguments or --input, not both")


def test_a_run_folder_given_as_checkpoint_names_its_checkpoints(run, capsys):
    one_line_error(capsys, ["translate", "--checkpoint", str(run), "a b c"],
                   "is a training run's folder, not a checkpoint", str(run / "final"))


def test_translate_at_a_terminal_answers_each_line_as_it_is_typed(run):
    import os
    import pty
    import select

    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(ROOT / "train_cli.py"), "translate", "--checkpoint",
                             str(run / "final"), "--method", "greedy"], stdin=terminal, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        os.write(controller, "a b c\n".encode())
        ready, _, _ = select.select([proc.stdout], [], [], 120)  # answered before stdin ends
        assert ready and proc.stdout.readline().endswith(b"\n"), proc.stderr.read1().decode()  # its translation
        os.write(controller, b"\x04")  # Ctrl-D
        assert proc.wait(timeout=60) == 0
        assert "one per line (Enter translates)" in proc.stderr.read().decode()
    finally:
        proc.kill()
        os.close(controller)
        os.close(terminal)


def test_decoding_options_the_method_ignores_are_noted(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("a b c\n"))
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--method", "greedy", "--beam", "8",
                           "--top-k", "5"]) == 0
    assert "note: --beam, --top-k have no effect with --method greedy; ignored" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.StringIO("a b c\n"))
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--beam", "2", "--alpha", "1"]) == 0
    assert "no effect" not in capsys.readouterr().err


def test_translate_n_best(run, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n")
    out = tmp_path / "out.txt"
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--input", str(src),
                           "--output", str(out), "--beam", "3", "--n-best", "3"]) == 0
    assert len(out.read_text().rstrip("\n").split("\t")) == 6  # three (text, score) pairs


def test_average_last_checkpoints(run, tmp_path, capsys):
    import torch

    from core.checkpoint import load_checkpoint

    out = tmp_path / "avg"
    assert train_cli.main(["average", "--run", str(run), "--last", "3", "--out", str(out)]) == 0
    averaged = load_checkpoint(out).model.state_dict()
    steps = ("step-0000010", "step-0000020", "step-0000030")
    states = [load_checkpoint(run / name).model.state_dict() for name in steps]
    assert averaged.keys() == states[0].keys()
    for name, value in averaged.items():  # every tensor (biases, norms, tied embeddings) the mean of all three
        torch.testing.assert_close(value, sum(state[name] for state in states) / 3)
    card = json.loads((out / "config.json").read_text())
    assert card["averaged_from"] == list(steps) and card["name"] == "avg"
    # safetensors writes its file 0600; a checkpoint's files all get the umask's mode.
    assert (out / "model.safetensors").stat().st_mode == (out / "config.json").stat().st_mode
    assert "averaged 3 checkpoints (step-0000010 .. step-0000030)" in capsys.readouterr().out
    assert train_cli.main(["average", "--run", str(run), "--last", "1", "--out", str(tmp_path / "one")]) == 0
    assert "copied the one checkpoint step-0000030" in capsys.readouterr().out


def test_resume_continues_the_run(run, tmp_path):
    import shutil

    copy = tmp_path / "resumed"
    shutil.copytree(run, copy)
    assert train_cli.main(["train", "--out", str(copy), "--resume", "--max-steps", "40"]) == 0  # the rest: run.json
    assert (copy / "step-0000040").exists()
    options = json.loads((copy / "run.json").read_text())["options"]
    assert options[options.index("--warmup") + 1] == "10" and options[options.index("--max-steps") + 1] == "40"
    lr = {r["step"]: r["lr"] for r in map(json.loads, (copy / "metrics.jsonl").read_text().splitlines())}
    assert lr[31] / lr[30] == pytest.approx((30 / 31) ** 0.5)  # eq. 3 past the run's warm-up of 10, not 4000's


def test_ctrl_c_saves_once_and_more_presses_while_it_saves_change_nothing(tmp_path):
    import signal
    import time

    out = tmp_path / "run"
    argv = [sys.executable, str(ROOT / "train_cli.py"), *TRAIN[:5], "--max-steps", "100000", "--eval-every", "0",
            "--limit", "200", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().count("\n") >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    for _ in range(6):  # a lecturer's impatient presses: the first saves, the others must not break it
        proc.send_signal(signal.SIGINT)
        time.sleep(0.08)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "saved" in err and "Traceback" not in err and "Exception ignored" not in err
    latest = cli.common.run_checkpoints(out)[-1]  # final/ is the interrupted run's latest, not missing or older
    assert (out / "final" / "model.safetensors").read_bytes() == (latest / "model.safetensors").read_bytes()


class CheckpointWriter:
    """Stands in for a Trainer in cli.loop.save: writes a step folder with its config.json."""
    step_count = 0

    def save(self, path: Path) -> Path:
        path.mkdir()
        (path / "config.json").write_text("{}")
        return path


def test_a_ctrl_c_while_pruning_leaves_no_half_deleted_step_folder(tmp_path, monkeypatch):
    import shutil

    args, trainer, rmtree = cli.loop.Saving(tmp_path, every=1, keep_last=1), CheckpointWriter(), shutil.rmtree
    for trainer.step_count in (1, 2):
        cli.loop.save(trainer, args)

    def interrupted(path, *args, **kwargs):  # Ctrl-C after the deletion took config.json
        (Path(path) / "config.json").unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    trainer.step_count = 3
    with pytest.raises(KeyboardInterrupt):
        cli.loop.save(trainer, args)
    assert [p.name for p in tmp_path.glob("step-*")] == ["step-0000003"]
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    trainer.step_count = 4
    cli.loop.save(trainer, args)  # sweeps what the interrupted deletion left
    assert [p.name for p in tmp_path.iterdir()] == ["step-0000004"]


def test_existing_out_folder_is_refused(run, capsys):
    before = sorted(p.name for p in run.iterdir())
    one_line_error(capsys, TRAIN + ["--out", str(run)], "already exists", "--resume")
    assert sorted(p.name for p in run.iterdir()) == before


def test_resume_with_another_model_config_is_refused(run, capsys, tmp_path):
    one_line_error(capsys, TRAIN + ["--out", str(run), "--resume", "--d-model", "32"], "different model config",
                   "--d-model 64 (now 32)", "leave those options out")


def test_missing_data_is_one_line_and_creates_nothing(capsys, tmp_path):
    out = tmp_path / "never"
    one_line_error(capsys, ["train", "--data", f"files:{tmp_path / 'nope'}", "--out", str(out)], "nope")
    assert not out.exists()


def test_mismatched_line_counts(capsys, tmp_path):
    (tmp_path / "a.de").write_text("eins\nzwei\n")
    (tmp_path / "b.en").write_text("one\n")
    out = tmp_path / "never"
    one_line_error(capsys, ["train", "--data", f"files:{tmp_path / 'a.de'},{tmp_path / 'b.en'}", "--out", str(out)],
                   "2", "1")
    assert not out.exists()


def lock(path: Path, monkeypatch) -> None:
    """path read-only; for root, who may write anyway, os.access is told so as well."""
    path.chmod(0o500 if path.is_dir() else 0o400)
    if os.geteuid() == 0:
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: (not mode & os.W_OK or Path(p) != path)
                            and access(p, mode, **kw))


def test_unwritable_out_folder(capsys, tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    lock(locked, monkeypatch)
    one_line_error(capsys, TRAIN + ["--out", str(locked / "run")], "not writable")


def test_out_folder_inside_a_file(capsys, tmp_path):
    (tmp_path / "file.txt").write_text("")
    one_line_error(capsys, TRAIN + ["--out", str(tmp_path / "file.txt" / "run")], "not a folder")


def test_unknown_task_lists_valid_ones(capsys, tmp_path):
    one_line_error(capsys, ["train", "--data", "synthetic:juggle", "--out", str(tmp_path / "x")], "reverse")


def test_help_lists_every_command(capsys):
    """Each command the parser has, listed under COMMAND in --help (a command added without help= would not be),
    not only named in the description above, which names them all in its first sentence."""
    with pytest.raises(SystemExit):
        train_cli.main(["--help"])
    listing = capsys.readouterr().out.split("positional arguments:\n")[1].split("\noptions:")[0]
    listed = re.findall(r"^    (\w+)", listing, re.M)
    assert listed == list(cli.args.build_parser().commands)


def test_version_names_the_studio_and_torch(capsys):
    import torch

    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--version"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith(f"Transformer Studio {core.__version__} (torch {torch.__version__}")


@pytest.mark.parametrize("option, value", [("--max-steps", "0"), ("--save-every", "0"), ("--keep-last", "0"),
                                           ("--lr", "-1"), ("--epochs", "0"), ("--eval-every", "-1"),
                                           ("--max-tokens", "nan")])
def test_out_of_range_training_numbers_are_refused_before_anything_runs(capsys, tmp_path, option, value):
    out = tmp_path / "never"
    usage_error(capsys, ["train", "--data", "synthetic:copy", "--out", str(out), option, value], option, value)
    assert not out.exists()


@pytest.mark.parametrize("argv", [["translate", "--n-best", "0"], ["translate", "--beam", "0"],
                                  ["evaluate", "--data", "synthetic:copy", "--limit", "-5"],
                                  ["average", "--run", "x", "--out", "y", "--last", "0"]])
def test_out_of_range_decoding_numbers_are_refused(capsys, argv):
    usage_error(capsys, argv, argv[-2])


def test_core_field_names_are_shown_as_options(capsys, tmp_path):
    one_line_error(capsys, ["train", "--data", "synthetic:copy", "--preset", "tiny", "--heads", "3",
                            "--out", str(tmp_path / "x")], "--d-model (64) must be divisible by --heads (3)")
    one_line_error(capsys, ["train", "--data", "synthetic:copy", "--dropout", "1.5", "--out", str(tmp_path / "x")],
                   ": error: --dropout must be a number in [0, 1)")
    one_line_error(capsys, ["train", "--data", "synthetic:copy", "--max-len", "100000000",
                            "--out", str(tmp_path / "x")],
                   ": error: --max-len must be at most 16,384 tokens")
    assert not (tmp_path / "x").exists()
    one_line_error(capsys, ["translate", "--method", "sample", "--top-p", "1.5"], "--top-p", "(0, 1]")


@pytest.mark.parametrize("option", [["--d-model", "1000000000"], ["--d-ff", "10000000000"], ["--layers", "100000"],
                                    ["--max-len", "1"], ["--vocab-size", "1"]])
def test_model_sizes_that_cannot_be_built_are_refused_before_anything_runs(capsys, tmp_path, option):
    """A traceback (an allocation of 120 GB) or a hang building 100,000 layers; max_len and vocab_size were
    refused by core under their field names."""
    argv = ["train", "--data", "synthetic:copy", "--preset", "tiny", *option, "--out", str(tmp_path / "x")]
    if option[0] in ("--max-len", "--vocab-size"):
        usage_error(capsys, argv, f"argument {option[0]}: must be an integer >= ")
    else:
        one_line_error(capsys, argv, "parameters: training it needs about")
    assert not (tmp_path / "x").exists()


def test_a_device_this_machine_lacks_is_refused_by_name(capsys, run):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    usage_error(capsys, ["evaluate", "--checkpoint", str(run / "final"), "--data", "synthetic:copy",
                         "--device", "cuda"], "argument --device: device 'cuda': no CUDA GPU")
    usage_error(capsys, ["translate", "--device", "banana"], "argument --device: unknown device 'banana'")


def test_help_shows_defaults_flags_included(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.1)" in out and "(default: off)" in out and "(default: False)" not in out


def test_average_never_overwrites_and_resume_needs_trainer_state(run, capsys, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    before = sorted(p.name for p in (copy / "step-0000030").iterdir())
    one_line_error(capsys, ["average", "--run", str(copy), "--out", str(copy / "step-0000030")], "already exists")
    one_line_error(capsys, ["average", "--run", str(copy), "--out", str(copy / "run.json" / "avg")],
                   "run.json is a file, not a folder")
    assert sorted(p.name for p in (copy / "step-0000030").iterdir()) == before
    # An averaged checkpoint named like a step holds no optimizer state: resuming from it is refused.
    assert train_cli.main(["average", "--run", str(copy), "--last", "2", "--out", str(copy / "step-0000099")]) == 0
    one_line_error(capsys, TRAIN + ["--out", str(copy), "--resume"], "no trainer state")


def test_a_run_that_never_saved_says_so(capsys, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    one_line_error(capsys, TRAIN + ["--out", str(out)], "no step-* checkpoint", "remove it")
    one_line_error(capsys, TRAIN + ["--out", str(out), "--resume"], "nothing to resume")


def test_tsv_direction_needs_column_languages(capsys, tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"house {i}\tHaus {i}\n" for i in range(50)))
    one_line_error(capsys, ["train", "--data", f"files:{tsv}", "--src", "de", "--tgt", "en",
                            "--out", str(tmp_path / "never")], "LANG1-LANG2")
    assert not (tmp_path / "never").exists()
    # Trained on the unnamed columns, the model is scored on the same file (its src/tgt were refused there).
    assert train_cli.main(["train", "--data", f"files:{tsv}", "--preset", "tiny", "--max-steps", "1",
                           "--eval-every", "0", "--out", str(tmp_path / "unnamed")]) == 0
    capsys.readouterr()
    assert train_cli.main(["evaluate", "--checkpoint", str(tmp_path / "unnamed" / "final"), "--data", f"files:{tsv}",
                           "--method", "greedy"]) == 0
    assert "BLEU" in capsys.readouterr().out


def test_too_small_a_unigram_vocabulary_is_refused_by_its_option(capsys, tmp_path):
    """Unigram, unlike BPE, will not grow past the size asked for to hold every character: tokenizers'
    bare Exception ended in a traceback."""
    (tmp_path / "a.txt").write_text("".join(f"{w} {i}\n" for i, w in enumerate("abcdefghijklmnopqrstuvwxyz" * 4)))
    letters = "abcdefghijklmnopqrstuvwxyz" * 4
    (tmp_path / "b.txt").write_text("".join(f"{w.upper()} {i}\n" for i, w in enumerate(letters)))
    one_line_error(capsys, ["train", "--data", f"files:{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}", "--tokenizer",
                            "unigram", "--vocab-size", "30", "--out", str(tmp_path / "never")],
                   "--vocab-size 30 is too small", "at least about")
    assert not (tmp_path / "never").exists()


def test_pairs_left_out_for_an_empty_side_are_said(capsys, tmp_path):
    (tmp_path / "a.txt").write_text("".join(f"w{i} x\n" for i in range(40)))
    (tmp_path / "b.txt").write_text("".join("\n" if i in (4, 6) else f"v{i} y\n" for i in range(40)))
    assert train_cli.main(TRAIN[:1] + ["--data", f"files:{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}", "--preset",
                                       "tiny", "--max-steps", "1", "--eval-every", "0",
                                       "--out", str(tmp_path / "r")]) == 0
    assert "note: 2 pairs with an empty side were left out (lines 5, 7)" in capsys.readouterr().err


def test_translate_keeps_one_output_line_per_input_line(run, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.StringIO("a b\u2028c\nq r\n"))  # U+2028 is not a line break here
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--method", "greedy"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final"), "--output",
                            str(tmp_path / "missing" / "out.txt")], "does not exist")
    one_line_error(capsys, ["translate", "--input", str(tmp_path)], "is a folder")
    one_line_error(capsys, ["translate", "--input", str(tmp_path / "absent.txt")], "absent.txt: no such file")


def test_output_never_overwrites_an_input_and_is_written_whole(run, capsys, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n")
    checkpoint = ["--checkpoint", str(run / "final"), "--method", "greedy"]
    one_line_error(capsys, ["translate", *checkpoint, "--input", str(src), "--output", str(src)],
                   "is the --input file")
    one_line_error(capsys, ["evaluate", *checkpoint, "--source-file", str(src), "--reference-file", str(src),
                            "--output", str(tmp_path / "." / "in.txt")], "is the --source-file file")
    assert src.read_text() == "a b c\n"
    tokenizer = run / "final" / "tokenizer.json"
    before = tokenizer.read_bytes()
    for command in ("translate", "evaluate"):  # the model read is an input too
        one_line_error(capsys, [command, *checkpoint, "--source-file" if command == "evaluate" else "--input",
                                str(src), *(["--reference-file", str(src)] if command == "evaluate" else []),
                                "--output", str(tokenizer)], "is the --checkpoint's tokenizer.json file")
    assert tokenizer.read_bytes() == before
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    assert train_cli.main(["translate", *checkpoint, "--input", str(src), "--output", str(out)]) == 0
    assert out.read_text() != "old\n" and len(out.read_text().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.txt"]


def test_output_through_a_symlink_or_into_a_fifo_keeps_them(run, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n")
    translate = ["translate", "--checkpoint", str(run / "final"), "--method", "greedy", "--input", str(src)]
    target, link = tmp_path / "target.txt", tmp_path / "link.txt"
    target.write_text("old\n")
    link.symlink_to(target.name)
    assert train_cli.main(translate + ["--output", str(link)]) == 0
    assert link.is_symlink() and target.read_text() != "old\n" and len(target.read_text().splitlines()) == 1
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    assert train_cli.main(translate + ["--output", str(fifo)]) == 0
    reader.join(timeout=30)
    assert fifo.is_fifo() and received == [target.read_text()]


def test_sampling_starts_where_the_studio_does():
    """The plain distribution (T 1, top-p 1) reads as nonsense: the CLI's defaults are core's readable ones."""
    from core.inference.options import SAMPLE_TEMPERATURE, SAMPLE_TOP_P

    args = cli.args.build_parser().parse_args(["translate", "--method", "sample", "x"])
    assert (args.temperature, args.top_p) == (SAMPLE_TEMPERATURE, SAMPLE_TOP_P) != (1.0, 1.0)


def test_a_min_len_beyond_the_models_reach_is_noted(run, capsys):
    translate = ["translate", "--checkpoint", str(run / "final"), "--method", "greedy", "a b"]
    assert train_cli.main(translate + ["--min-len", "100000"]) == 0
    assert "note: --min-len 100000 is more than" in capsys.readouterr().err
    assert train_cli.main(translate + ["--min-len", "2"]) == 0
    assert "--min-len" not in capsys.readouterr().err


def test_a_sentence_argument_that_is_not_text_is_named_by_its_number(run, capsys):
    """Bytes that are not UTF-8 reach Python as lone surrogates; the refusal named core's list index."""
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final"), "a b", "a M\udce4dchen"],
                   "error: argument 2: character 4 is U+DCE4")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failed_write_names_the_file_without_pythons_errno(run, capsys):
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final"), "--output", "/dev/full", "a b c"],
                   "error: cannot write /dev/full (--output): No space left on device")
    assert "[Errno" not in cli.common.in_words(OSError(2, "No such file or directory", "/proc/x"))


def test_input_from_a_fifo_is_read_as_a_file(run, tmp_path, capsys):
    """--input <(...) or /dev/stdin: a pipe was refused as "no such file"."""
    fifo = tmp_path / "in-fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("a b c\nd e\n"), daemon=True)
    writer.start()
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--method", "greedy",
                           "--input", str(fifo)]) == 0
    writer.join(timeout=30)
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_output_to_dev_stdout_redirected_to_a_file_keeps_what_the_file_held(run, tmp_path):
    src, log = tmp_path / "in.txt", tmp_path / "log"
    src.write_text("a b c\n")
    log.write_text("earlier\n")
    with open(log, "a") as appended:  # a shell's >> log
        subprocess.run([sys.executable, str(ROOT / "train_cli.py"), "translate", "--checkpoint", str(run / "final"),
                        "--method", "greedy", "--input", str(src), "--output", "/dev/stdout"],
                       stdout=appended, check=True, timeout=120)
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier" and len(lines) == 2


def test_output_through_a_symlink_loop_is_one_line(run, capsys, tmp_path):
    (tmp_path / "one").symlink_to(tmp_path / "two")
    (tmp_path / "two").symlink_to(tmp_path / "one")
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final"), "--output", str(tmp_path / "one")],
                   "symlinks cannot be followed")


def test_evaluate_output_is_never_a_data_file(run, capsys, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "val", "test"):
        (data / f"{split}.en").write_text("a b\n")
        (data / f"{split}.de").write_text("b a\n")
    one_line_error(capsys, ["evaluate", "--checkpoint", str(run / "final"), "--data", f"files:{data}",
                            "--output", str(data / "test.de")], f"is the --data {data / 'test.de'} file")
    assert (data / "test.de").read_text() == "b a\n"
    for side in ("src", "ref"):  # two aligned files of one name
        (tmp_path / side).mkdir()
        (tmp_path / side / "test.txt").write_text("a b\n")
    pair = f"files:{tmp_path / 'src' / 'test.txt'},{tmp_path / 'ref' / 'test.txt'}"
    for written in ("src", "ref"):
        one_line_error(capsys, ["evaluate", "--checkpoint", str(run / "final"), "--data", pair, "--output",
                                str(tmp_path / written / "test.txt")], "would destroy the input")


def test_unwritable_output_is_refused_before_decoding(run, capsys, tmp_path, monkeypatch):
    out = tmp_path / "out.txt"
    out.write_text("keep\n")
    lock(out, monkeypatch)
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final"), "--output", str(out)],
                   "--output", "not writable")


def test_stdin_that_is_not_utf8_is_one_line_naming_the_line(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a b\nHund \xe4\n"), encoding="ascii",
                                                        errors="surrogateescape"))  # what LANG=C gives
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final")], "stdin line 2: invalid UTF-8 (byte 0xe4)")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("q r\nü s\n".encode()), encoding="ascii"))
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--method", "greedy"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert "note: stdin line 2: 1 unknown piece mapped to <unk>: 'ü'" in captured.err


def test_typed_lines_name_a_bad_line_once_and_go_on(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a b\nHund \xe4\nq\n")))
    assert list(cli.files.typed_lines()) == [(1, "a b"), (3, "q")]
    assert capsys.readouterr().err == "error: line 2: invalid UTF-8 (byte 0xe4); save the text as UTF-8\n"


def test_translate_with_stdin_closed_says_where_sentences_come_from(run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)  # what `<&-` gives
    one_line_error(capsys, ["translate", "--checkpoint", str(run / "final")], "no sentences to translate", "closed")


def test_evaluate_reports_notices_and_checks_the_direction(run, capsys, tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("a b\nü c\n")
    ref.write_text("b a\nc ü\n")
    assert train_cli.main(["evaluate", "--checkpoint", str(run / "final"), "--source-file", str(src),
                           "--reference-file", str(ref), "--method", "greedy"]) == 0
    assert f"note: {src} line 2: 1 unknown piece mapped to <unk>" in capsys.readouterr().err
    one_line_error(capsys, ["evaluate", "--checkpoint", str(ROOT / "checkpoints/multi30k-de-en-small"), "--data",
                            "synthetic:numbers"], "translates de->en but --data gives en->de",
                   "synthetic:numbers runs one way only")
    one_line_error(capsys, ["evaluate", "--data", "synthetic:copy", "--source-file", str(src),
                            "--reference-file", str(ref)], "either --data", "not both")
    pairs = tmp_path / "pairs.tsv"  # data in neither of the checkpoint's languages (in, out)
    pairs.write_text("".join(f"Hund {i}\tdog {i}\n" for i in range(20)))
    one_line_error(capsys, ["evaluate", "--checkpoint", str(run / "final"), "--data", f"files:{pairs}:de-en"],
                   "translates in->out, but ", "src_lang='in' is not available")


def test_evaluate_limit_with_all_references_keeps_every_reference_of_the_first_sources(run, capsys, tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("a b\na b\nc d\n")
    ref.write_text("b a\na b\nd c\n")
    assert train_cli.main(["evaluate", "--checkpoint", str(run / "final"), "--source-file", str(src),
                           "--reference-file", str(ref), "--method", "greedy", "--all-references", "--limit", "1"]) == 0
    assert ": 1 sentences (2 references), greedy" in capsys.readouterr().out


def test_evaluate_says_which_of_a_folders_test_sets_it_scored(capsys, tmp_path):
    for split, n in (("train", 6), ("val", 2), ("test_2017_mscoco", 2), ("test_2016_flickr", 3)):
        (tmp_path / f"{split}.de").write_text("".join(f"Ein Hund {i} .\n" for i in range(n)))
        (tmp_path / f"{split}.en").write_text("".join(f"A dog {i} .\n" for i in range(n)))
    assert train_cli.main(["evaluate", "--checkpoint", str(ROOT / "checkpoints/multi30k-de-en-small"), "--data",
                           f"files:{tmp_path}", "--method", "greedy"]) == 0
    captured = capsys.readouterr()
    assert "scoring the test split: test_2016_flickr.de → test_2016_flickr.en" in captured.err
    assert "3 sentences" in captured.out


def test_a_command_refuses_its_own_unknown_options_briefly(capsys):
    usage_error(capsys, ["translate", "--bem", "4"], "train_cli.py translate: error: unrecognized arguments: --bem")
    err = usage_error(capsys, ["train", "--data", "synthetic:copy", "--out", "x", "--lr", "-1"], "--lr")
    assert len(err.splitlines()) == 2  # the command's one-line usage, then the error
    usage_error(capsys, ["translate", "--seed", str(2**64)], "--seed", "2**63 - 1")


def test_help_shows_defaults_of_zero(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["translate", "--help"])
    assert "(0: off) (default: 0)" in capsys.readouterr().out


def test_resume_past_the_last_step_and_out_as_a_file_are_refused(run, capsys, tmp_path):
    for steps in ("20", "30"):  # at the last step too: there is nothing left to train
        one_line_error(capsys, TRAIN + ["--out", str(run), "--resume", "--max-steps", steps], "already at step 30",
                       "larger --max-steps")
    (tmp_path / "notes.txt").write_text("")
    one_line_error(capsys, TRAIN + ["--out", str(tmp_path / "notes.txt")], "is a file; give a folder")


def test_resume_takes_the_runs_options_unless_given_again(tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps({"options": ["--data", "synthetic:copy", "--epochs", "2.0",
                                                               "--warmup", "7", "--norm-first"]}))
    resume = ["train", "--out", str(tmp_path), "--resume"]
    args = cli.args.parse_arguments(resume + ["--warmup", "9"])
    chosen = (args.data, args.epochs, args.max_steps, args.warmup, args.norm_first)
    assert chosen == ("synthetic:copy", 2.0, None, 9, True)
    args = cli.args.parse_arguments(resume + ["--max-steps", "50"])  # a new length of the other kind
    assert (args.epochs, args.max_steps) == (None, 50)
    one_line_error(capsys, ["train", "--out", str(tmp_path / "new")], "train needs --data")
    one_line_error(capsys, ["train", "--out", str(tmp_path / "typo"), "--resume"], "typo does not exist")


def test_resume_can_switch_compile_and_tensorboard_off(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"options": ["--data", "synthetic:copy", "--compile",
                                                               "--tensorboard"]}))
    resume = ["train", "--out", str(tmp_path), "--resume"]
    assert (lambda a: (a.compile, a.tensorboard))(cli.args.parse_arguments(resume)) == (True, True)
    args = cli.args.parse_arguments(resume + ["--no-compile", "--no-tensorboard"])
    assert (args.compile, args.tensorboard) == (False, False)


def test_core_field_names_become_the_commands_options_and_nothing_else():
    assert (cli.args.option_names("ModelConfig.d_model (64) must be divisible by n_heads (3)", "train")
            == "--d-model (64) must be divisible by --heads (3)")
    assert cli.args.option_names("DecodeOptions.beam_size must be >= 1", "translate") == "--beam must be >= 1"
    assert cli.args.option_names("DecodeOptions.top_p must be", "evaluate") == "--top-p must be"
    for message, command in [("--out runs/dropout is a file", "train"),
                             ("No such file: 'data/max_len/x.txt'", "train"),
                             ("run/config.json: ModelConfig.attention_dropout must be a number", "translate"),
                             ("run/config.json: ModelConfig.d_model must be even", "translate"),
                             ("run/config.json: ModelConfig.d_model must be even", "train"),  # --resume
                             ("TrainConfig.peak_lr must be", "translate")]:  # no --lr there
        assert cli.args.option_names(message, command) == message


# ----- review fixes: evaluation split, final/, averaging, notes, resume records ----------------------
def test_evaluate_scores_the_split_carved_with_the_checkpoints_seed(tmp_path, capsys):
    from types import SimpleNamespace

    from core.data.files import load_corpus

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"quelle {i}\n" for i in range(300)))
    b.write_text("".join(f"source {i}\n" for i in range(300)))
    spec = f"files:{a},{b}"
    bundle = SimpleNamespace(info={"train": {"seed": 3}, "src_lang": "src", "tgt_lang": "tgt"}, name="m")
    args = cli.args.parse_arguments(["evaluate", "--data", spec, "--split", "test"])
    sources, _ = cli.decode.data_pairs(args, bundle)
    held_out = load_corpus(spec, seed=3)
    assert sources == [s for s, _ in held_out.test] != [s for s, _ in load_corpus(spec, seed=0).test]
    assert not set(sources) & {s for s, _ in held_out.train}  # never a pair the model trained on
    note = capsys.readouterr().err
    assert "carved out with seed 3" in note and "trained on other data" in note
    bundle.info["data"] = held_out.description  # the checkpoint trained on these very files
    cli.decode.data_pairs(args, bundle)
    assert "so none of them was trained on" in capsys.readouterr().err


def test_final_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    import shutil

    from core.checkpoint import atomic, copy_checkpoint

    run = tmp_path / "run"
    for step in ("step-1", "step-2"):
        (run / step).mkdir(parents=True)
        (run / step / "config.json").write_text(step)
        (run / step / "model.safetensors").write_text(step)
    copy_checkpoint(run / "step-1", run / "final")
    copied, copy = [], shutil.copy2

    def cut_short(source, target):
        if copied:
            raise KeyboardInterrupt  # one file copied, then Ctrl-C
        copied.append(copy(source, target))

    monkeypatch.setattr(atomic.shutil, "copy2", cut_short)
    with pytest.raises(KeyboardInterrupt):
        copy_checkpoint(run / "step-2", run / "final")
    assert copied and sorted(p.name for p in run.iterdir()) == ["final", "step-1", "step-2"]  # no partial copy
    assert [(run / "final" / f).read_text() for f in ("config.json", "model.safetensors")] == ["step-1"] * 2
    monkeypatch.undo()
    copy_checkpoint(run / "step-2", run / "final")
    assert [(run / "final" / f).read_text() for f in ("config.json", "model.safetensors")] == ["step-2"] * 2
    assert sorted(p.name for p in run.iterdir()) == ["final", "step-1", "step-2"]


def test_average_refuses_checkpoints_of_another_vocabulary(run):
    from core.checkpoint import average_checkpoints, load_checkpoint
    from core.data.tokenizer import Tokenizer

    first, second = (load_checkpoint(run / name) for name in ("step-0000020", "step-0000030"))
    vocabulary = json.loads(second.tokenizer.to_json())
    words = vocabulary["model"]["vocab"]
    x, y = [w for w in words if words[w] >= 4][:2]
    words[x], words[y] = words[y], words[x]  # same size and shapes, two tokens' ids swapped
    second.tokenizer = Tokenizer.from_json(json.dumps(vocabulary))
    with pytest.raises(ValueError, match="different tokenizer"):
        average_checkpoints([first, second])
    second.model.config.d_ff += 1
    with pytest.raises(ValueError, match=r"d_ff \d+ \(not \d+\)"):  # the field that differs is named
        average_checkpoints([first, second])


def test_an_option_the_schedule_ignores_is_noted_and_each_step_logged_once_when_not_a_terminal(capsys, tmp_path):
    out = tmp_path / "run"
    assert train_cli.main(TRAIN[:5] + ["--max-steps", "2", "--eval-every", "0", "--limit", "50", "--lr", "0.01",
                                       "--warmup", "1", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "--lr has no effect with --schedule noam" in captured.err
    assert "step 2/2: loss " in captured.out  # a plain line for a log, not a progress bar's redraws
    assert "\r" not in captured.err
    assert train_cli.main(["train", "--out", str(out), "--resume", "--max-steps", "3"]) == 0
    assert "has no effect" not in capsys.readouterr().err  # said when the run began, not at each resume
    assert train_cli.main(["train", "--out", str(out), "--resume", "--max-steps", "4", "--lr", "0.02"]) == 0
    assert "--lr has no effect with --schedule noam" in capsys.readouterr().err  # given again: said again


def test_resume_trims_metrics_of_steps_to_be_trained_again(run, tmp_path):
    import shutil

    copy = tmp_path / "resumed"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / "step-0000030")  # killed after step 30 was logged but before it was saved
    with open(copy / "metrics.jsonl", "a") as metrics:
        metrics.write('{"step": 31, "lo')  # and in the middle of a line
    assert train_cli.main(["train", "--out", str(copy), "--resume", "--max-steps", "32"]) == 0
    steps = [json.loads(line)["step"] for line in (copy / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 33))


def test_resume_refuses_another_data_split_or_vocabulary_and_keeps_data_paths_absolute(run, capsys, tmp_path,
                                                                                       monkeypatch):
    one_line_error(capsys, ["train", "--out", str(run), "--resume", "--seed", "5", "--max-steps", "40"],
                   "--seed 5 (the run's: 0)", "data split")
    one_line_error(capsys, ["train", "--out", str(run), "--resume", "--vocab-size", "99", "--max-steps", "40"],
                   "--vocab-size 99 (the run's: 8000)")
    one_line_error(capsys, ["train", "--out", str(run), "--resume", "--max-tokens", "1000", "--max-steps", "40"],
                   "--max-tokens 1000 (the run's: 512)", "batches")  # not the batcher's "max_tokens=512"
    one_line_error(capsys, ["train", "--out", str(run), "--resume", "--data", "synthetic:reverse", "--max-steps", "40"],
                   "--data synthetic:reverse holds other training or validation pairs")  # same words, another task
    (tmp_path / "a.txt").write_text("".join(f"w{i} x\n" for i in range(40)))
    (tmp_path / "b.txt").write_text("".join(f"v{i} y\n" for i in range(40)))
    monkeypatch.chdir(tmp_path)
    assert train_cli.main(TRAIN[:1] + ["--data", "files:a.txt,b.txt", "--preset", "tiny", "--max-steps", "1",
                                       "--eval-every", "0", "--out", "files-run"]) == 0
    options = json.loads((tmp_path / "files-run" / "run.json").read_text())["options"]
    assert options[options.index("--data") + 1] == f"files:{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}"
    monkeypatch.chdir(ROOT)  # resumed from another folder, the run still finds its data
    assert train_cli.main(["train", "--out", str(tmp_path / "files-run"), "--resume", "--max-steps", "2"]) == 0
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).rename(moved / name)
    capsys.readouterr()
    assert train_cli.main(["train", "--out", str(tmp_path / "files-run"), "--resume", "--max-steps", "3",
                           "--data", f"files:{moved / 'a.txt'},{moved / 'b.txt'}"]) == 0  # the data moved: taken
    (moved / "b.txt").write_text("".join(f"u{i} z\n" for i in range(40)))  # another corpus under the same names
    capsys.readouterr()
    one_line_error(capsys, ["train", "--out", str(tmp_path / "files-run"), "--resume", "--max-steps", "4",
                            "--data", f"files:{moved / 'a.txt'},{moved / 'b.txt'}"],
                   "holds other training or validation pairs than the run was trained on;", "start a new run")
    one_line_error(capsys, ["train", "--out", str(tmp_path / "files-run"), "--resume", "--max-steps", "4",
                            "--data", "synthetic:reverse"], "--tokenizer word (the run's: bpe)")  # checked first
    (tmp_path / "files-run" / "run.json").unlink()
    one_line_error(capsys, ["train", "--out", str(tmp_path / "files-run"), "--resume"],
                   "train needs --data (there is no readable", "run.json to take the run's from)")


def test_resume_compares_the_tokenizer_and_languages_the_run_used():
    from types import SimpleNamespace

    bundle = SimpleNamespace(tokenizer=SimpleNamespace(kind="word"), info={"src_lang": "de", "tgt_lang": "en"})
    corpus = SimpleNamespace(src_lang="de", tgt_lang="en")
    for tokenizer in (None, "word"):  # inferred, or given again: the same
        cli.resume.check_same_vocabulary_and_direction(RunPlan("synthetic:copy", tokenizer_kind=tokenizer),
                                                      corpus, bundle)
    with pytest.raises(cli.common.CLIError, match=r"--tokenizer bpe \(the run's: word\), --tgt fr \(the run's: en\)"):
        cli.resume.check_same_vocabulary_and_direction(RunPlan("files:x"),
                                                      SimpleNamespace(src_lang="de", tgt_lang="fr"), bundle)


def test_a_damaged_latest_checkpoint_says_how_to_resume_from_the_one_before(run, capsys, tmp_path):
    import shutil

    copy = tmp_path / "damaged"
    shutil.copytree(run, copy)
    (copy / "step-0000030" / "trainer.pt").write_bytes(b"PK\x03\x04 cut short")
    one_line_error(capsys, ["train", "--out", str(copy), "--resume", "--max-steps", "40"],
                   "damaged or truncated", f"mv {copy / 'step-0000030'} {copy / 'damaged-step-0000030'}")
    (copy / "step-0000030").rename(copy / "damaged-step-0000030")
    assert train_cli.main(["train", "--out", str(copy), "--resume", "--max-steps", "40"]) == 0
    (copy / "run.json").write_text('{"options": ["--data", "synth')  # cut short too
    assert train_cli.main(["train", "--out", str(copy), "--resume", "--max-steps", "50"]) == 2
    err = capsys.readouterr().err
    assert "run.json cannot be read" in err and "train needs --data (there is no readable" in err


def test_n_best_lines_all_have_two_columns_per_hypothesis(run, tmp_path):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("a b c\n\nq r\n")
    assert train_cli.main(["translate", "--checkpoint", str(run / "final"), "--input", str(src),
                           "--output", str(out), "--beam", "3", "--n-best", "3"]) == 0
    assert [len(line.split("\t")) for line in out.read_text().splitlines()] == [6, 6, 6]


def test_more_torchrun_processes_than_gpus_are_refused_before_any_group_starts(monkeypatch):
    """NCCL needs a GPU per process; without the check, the extra processes failed with an
    "invalid device ordinal" inside their first copy to the GPU."""
    import torch.distributed as dist

    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: pytest.fail("a process group was started"))
    with pytest.raises(cli.common.CLIError, match=r"started 4 processes on a machine with 2 GPU\(s\).*"
                                                 r"--nproc_per_node=2 or fewer"):
        cli.train.setup_distributed()
