"""How a command-line refusal looks, shared by the CLI's tests and the tests of what the CLI refuses."""
from __future__ import annotations

import pytest

import train_cli


def one_line_error(capsys, argv, *needles) -> None:
    """A command's refusal: one line in argparse's style, plus argparse's pointer to --help when it names an
    option (so --top-p 1.5, refused by core, reads as --beam 0, refused by argparse)."""
    assert train_cli.main(argv) != 0
    err = capsys.readouterr().err.strip()
    prog = f"train_cli.py {argv[0]}"
    first, *rest = err.splitlines()
    assert first.startswith(f"{prog}: error: "), err
    assert rest == ([f"(`{prog} --help` lists every option)"] if first.startswith(f"{prog}: error: -") else []), err
    for needle in needles:
        assert needle in err, err


def usage_error(capsys, argv, *needles) -> str:
    """argparse's refusal: exit code 2, the option named, nothing run. Returns what it printed."""
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    return err
