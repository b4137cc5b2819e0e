"""`export`: a checkpoint written for another inference engine (core/export): CTranslate2, or Hugging Face
transformers' MarianMT. Each export translates a few sentences itself and is refused unless it matches ours."""
from __future__ import annotations

import argparse

from core.export import ExportError

from .common import CLIError, check_creatable, load_bundle
from .files import read_text_lines

PACKAGES = {"ctranslate2": "ctranslate2", "transformers": "transformers"}


def command_export(args: argparse.Namespace) -> None:
    if args.out.exists():
        raise CLIError(f"{args.out} already exists; give a new folder (export never overwrites)")
    check_creatable(args.out)
    sentences = [line for line in read_text_lines(args.check_input) if line.strip()] if args.check_input else None
    if args.check_input and not sentences:
        raise CLIError(f"--check-input {args.check_input} holds no sentences")
    bundle = load_bundle(args.checkpoint, "cpu")
    try:
        if args.format == "ctranslate2":
            from core.export.ctranslate2 import export_ctranslate2 as export
        else:
            from core.export.marian import export_marian as export
        out = export(bundle, args.out, sentences)
    except ImportError as exc:
        if exc.name not in PACKAGES:
            raise
        raise CLIError(f"--format {args.format} needs the {exc.name} package: pip install \"{exc.name}\" (or the "
                       f"project's extra: pip install -e \".[export]\")") from None
    except ExportError as exc:
        raise CLIError(str(exc)) from None
    print(f"exported {bundle.name} to {out} ({args.format}); checked: it translates the check sentences as ours does")
