"""train_cli.py's entry point: parse, run the command, and turn every user error into one line and exit
code 2."""
from __future__ import annotations

import sys

from core.training.trainer import TrainingStopped

from .args import option_names, parse_arguments
from .average import command_average
from .common import CLIError, in_words, refusal
from .decode import command_evaluate, command_translate
from .export import command_export
from .score import command_score
from .train import command_train


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_arguments(argv)
        commands = {"train": command_train, "evaluate": command_evaluate, "translate": command_translate,
                    "score": command_score, "average": command_average, "export": command_export}
        try:
            commands[args.command](args)
        except (CLIError, ValueError, OSError, TrainingStopped) as exc:
            print(refusal(option_names(in_words(exc), args.command), args.command), file=sys.stderr)
            return 2
    except KeyboardInterrupt:  # while loading or tokenizing; an interrupted training run saves first
        print("interrupted", file=sys.stderr)
        return 130
    return 0
