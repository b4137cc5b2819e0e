"""Reading sentences (files, arguments, stdin as typed) and writing outputs without ever destroying an
input or leaving half a file."""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from core.checkpoint import FILES, OPTIONAL_FILES, SHARD_NAME, WEIGHTS_INDEX
from core.data.corpus import decode_lines, read_lines, split_lines
from core.data.files import local_files, local_path

from .common import CLIError


def read_text_lines(path: Path) -> list[str]:
    if path.is_dir():  # read_lines would call a folder "no such file"
        raise CLIError(f"{path} is a folder; give a text file, one sentence per line")
    return read_lines(path)  # a missing file: FileNotFoundError, one line from main()


def checkpoint_inputs(checkpoint: Path) -> dict[str, Path]:
    """The checkpoint's files, for check_output: inputs too (an --output over its tokenizer.json broke it)."""
    names = [*FILES, *OPTIONAL_FILES, WEIGHTS_INDEX]
    if checkpoint.is_dir():  # sharded weights: every shard is an input too
        names += [p.name for p in sorted(checkpoint.iterdir()) if SHARD_NAME.fullmatch(p.name)]
    return {f"--checkpoint's {name}": checkpoint / name for name in names}


def check_output(path: Path | None, inputs: dict[str, Path | None]) -> None:
    """Refuse an --output that cannot be written, or that is one of the inputs, before the work."""
    if path is None:
        return
    if path.is_dir():
        raise CLIError(f"--output {path} is a folder; give a file name")
    for option, source in inputs.items():
        if source is not None and path.exists() and source.exists() and path.samefile(source):
            raise CLIError(f"--output {path} is the {option} file: writing it would destroy the input; "
                           f"choose another file")
    if _written_in_place(path):
        needs_writing = [path]
    else:
        try:
            folder = path.resolve().parent
        except (RuntimeError, OSError) as exc:  # a symlink loop
            raise CLIError(f"--output {path}: its symlinks cannot be followed ({exc})") from None
        if not folder.is_dir():
            raise CLIError(f"--output {path}: the folder {folder} does not exist")
        # write_output creates a temporary file in the folder and renames it over the file.
        needs_writing = [folder, path] if path.exists() else [folder]
    for target in needs_writing:
        if not os.access(target, os.W_OK):
            raise CLIError(f"--output {path} is not writable" + (f" (its folder {target} is not)"
                                                                 if target != path else ""))


def _standard_stream(path: Path):
    """sys.stdout or sys.stderr when path is the file it writes to (/dev/stdout, or the very file standard
    output goes to), else None."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if os.path.samestat(os.stat(path), os.fstat(stream.fileno())):
                return stream
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # no such file, or no descriptor
            continue
    return None


def _written_in_place(path: Path) -> bool:
    """Not a regular file to replace: a FIFO, a terminal, /dev/null, /dev/stdout and the like."""
    return ((path.exists() and not path.is_file()) or str(path.absolute()).startswith(("/dev/", "/proc/"))
            or _standard_stream(path) is not None)


def write_output(path: Path, text: str) -> None:
    """Write a regular file through a temporary file in its folder, so a failure leaves any old file whole; a
    symlink's file is replaced, not the link. Standard output or error (even redirected to a file) gets the
    text through its own stream, after what it printed before; a FIFO or device is written as it is."""
    stream = _standard_stream(path)
    try:
        if stream is not None:
            stream.write(text)
            stream.flush()
            return
        if _written_in_place(path):
            with open(path, "w", encoding="utf-8") as device:
                device.write(text)
            return
    except OSError as exc:  # /dev/full: "No space left on device", said with the file it was writing
        raise OSError(exc.errno, f"cannot write {path} (--output): {exc.strerror}") from None
    target = path.resolve()
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def data_files(spec: str | None) -> list[Path]:
    """The local files a --data files:... or hf:PATH spec reads, for check_output."""
    kind, _, rest = (spec or "").partition(":")
    if kind == "files" or (kind == "hf" and rest and local_path(rest)):
        return local_files(rest)
    return []


def read_stdin() -> list[str]:
    """stdin's lines as UTF-8, whatever the locale: under LANG=C Python would decode ü as surrogates."""
    if hasattr(sys.stdin, "buffer"):
        return decode_lines(sys.stdin.buffer.read(), "stdin")
    return split_lines(sys.stdin.read())  # a text stream with no bytes beneath (an embedding program's)


def typed_lines():
    """(number, line) for each line of stdin as it is typed, UTF-8 whatever the locale; a line with a bad
    byte is said and skipped, so one slip does not end the session."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream with no bytes beneath (an embedding program's)
        yield from enumerate((line.rstrip("\r\n") for line in sys.stdin), start=1)
        return
    for number, raw in enumerate(iter(stream.readline, b""), start=1):
        try:
            yield number, decode_lines(raw, "", first_line=number)[0]
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
