"""Issue 66: the README's CLI recipes stay true. Every command line of its CLI block parses (each option is one
its command has), and they run cut short: two training steps, three sentences, what they write in a temporary
folder. Those that read ../shared/data or train a recipe take minutes: slow."""
from __future__ import annotations

import io
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import cli.args
import train_cli
from core.data.corpus import read_lines
from core.training.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
WRITTEN = ("runs/", "exported/", "scores.tsv", "test_2016.en")  # where the recipes write, under the root
SHARED_DATA = ROOT.parent / "shared" / "data"


@dataclass
class Command:
    argv: list[str]  # what follows train_cli.py
    stdin: str | None = None  # what `echo ... |` feeds it
    slow: bool = False  # reads ../shared/data, a recipe's corpus, or a run trained on them: minutes, not seconds

    def reads_a_corpus(self) -> bool:
        return any(word.startswith("files:") or word == "--recipe" or "shared/data" in word for word in self.argv)

    def __str__(self) -> str:
        return shlex.join(["train_cli.py", *self.argv])


def cli_block() -> str:
    """The bash block under the README's "CLI recipes"."""
    section = README.read_text(encoding="utf-8").split("\n## CLI recipes\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0]


def readme_commands() -> list[Command]:
    """Each train_cli.py command of the block: continued lines joined, an `echo ... |` before it as its stdin."""
    commands = []
    for line in cli_block().replace("\\\n", " ").splitlines():
        feed, _, line = line.rpartition("|") if "|" in line else ("", "", line)
        words = shlex.split(line, comments=True)
        if not words:
            continue
        at = next(i for i, word in enumerate(words) if word.endswith("train_cli.py"))
        commands.append(Command(words[at + 1:], shlex.split(feed)[1] + "\n" if feed else None))
    slow_runs: list[str] = []
    for command in commands:
        command.slow = command.reads_a_corpus() or any(word.startswith(run) for word in command.argv
                                                       for run in slow_runs)
        if command.slow and "--out" in command.argv:
            slow_runs.append(command.argv[command.argv.index("--out") + 1])
    return commands


def cut_short(command: Command, tmp: Path) -> list[str]:
    """The command as a test runs it: what it writes in tmp, two steps of training (three resumed), three
    sentences evaluated, scored or translated from a file."""
    argv = [str(tmp / word) if word.startswith(WRITTEN) else word for word in command.argv]
    name = argv[0]
    if name == "train":
        steps = "3" if "--resume" in argv else "2"
        set_option(argv, "--max-steps", steps)
    if name in ("evaluate", "score"):
        set_option(argv, "--limit", "3")
    if name == "translate" and "--input" in argv:
        at = argv.index("--input") + 1
        first = tmp / "input.txt"
        first.write_text("".join(line + "\n" for line in read_lines(Path(argv[at]))[:3]), encoding="utf-8")
        argv[at] = str(first)
    return argv


def set_option(argv: list[str], option: str, value: str) -> None:
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]


def run_all(commands: list[Command], tmp: Path, monkeypatch, capsys) -> None:
    """Each command from the repository's root, as the README says to run them; the failures named together."""
    monkeypatch.chdir(ROOT)
    failed = []
    for command in commands:
        monkeypatch.setattr(sys, "stdin", io.StringIO(command.stdin or ""))
        code = train_cli.main(cut_short(command, tmp))
        captured = capsys.readouterr()
        if code != 0:
            failed.append(f"{command}: exit {code}: {captured.err.strip()[-500:]}")
    assert not failed, "\n".join(failed)


def runnable(command: Command) -> bool:
    """Not the 8-GPU paper-base run on data the reader prepares, nor an export without its engine installed."""
    if command.argv[:2] == ["train", "--preset"] and "paper-base" in command.argv:
        return False
    return command.argv[0] != "export" or _installed("ctranslate2")


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_every_command_of_the_readme_parses(capsys):
    commands = readme_commands()
    assert len(commands) >= 15 and {c.argv[0] for c in commands} == set(cli.args.cli_parser().commands)
    refused = []
    for command in commands:
        try:
            cli.args.cli_parser().parse_args(command.argv)
        except SystemExit:
            refused.append(f"{command}: {capsys.readouterr().err.strip()}")
    assert not refused, "\n".join(refused)


def test_the_commands_without_shared_data_run_cut_short(tmp_path, monkeypatch, capsys):
    quick = [c for c in readme_commands() if not c.slow and runnable(c)]
    assert {c.argv[0] for c in quick} == {"train", "translate"}
    run_all(quick, tmp_path, monkeypatch, capsys)


@pytest.mark.slow
def test_the_commands_on_shared_data_run_cut_short(tmp_path, monkeypatch, capsys):
    if not (SHARED_DATA / "multi30k" / "train.de.gz").exists():
        pytest.skip(f"{SHARED_DATA} is absent")
    run_all([c for c in readme_commands() if c.slow and runnable(c)], tmp_path, monkeypatch, capsys)


def test_the_library_snippet_runs_from_the_repository_root(monkeypatch, capsys):
    section = README.read_text(encoding="utf-8").split("\n## The library\n", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    monkeypatch.chdir(ROOT)
    exec(compile(snippet, "README.md", "exec"), {})
    assert "station" in capsys.readouterr().out  # "Wo ist der Bahnhof?" in English


def test_each_recipe_the_readme_names_takes_the_time_its_recipe_says():
    """One time per recipe: core/training/recipes.py's, which --help quotes too."""
    text = re.sub(r"\s*\n#?\s*", " ", README.read_text(encoding="utf-8"))  # lines and comments joined
    named = [recipe for recipe in RECIPES.values() if f"--recipe {recipe.name}" in text]
    assert named and [r.name for r in named if r.duration not in text] == []
