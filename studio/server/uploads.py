"""Opening a checkpoint a visitor uploads: its three files (a sharded one's index and shards in place of
model.safetensors), or a .zip of its folder, copied into a fresh folder (never more than the checkpoint's
own files, each within the upload limit), loaded into the registry and picked."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import gradio as gr

from core.bundle import parameter_count
from core.checkpoint import TRAINER_STATE, is_checkpoint_file, missing_files
from core.checkpoint.layout import TARGET_TOKENIZER
from core.model.config import ModelConfig

from ..shell import picker_update, status_line
from ..text import clip, info, warn
from ..train.sources import UPLOAD_COPY_PREFIX, upload_root
from . import limits
from .limits import MAX_UPLOADED_MODELS, check_unpacked_size, check_upload_size
from .registry import ModelRegistry
from .slots import current_budget

COPY_PREFIX = "studio-upload-"  # the temporary folder an upload is assembled in
# Ends every refusal of an upload that is not a checkpoint: what to upload instead.
UPLOAD_EXPECTED = ("The studio opens a .zip of a checkpoint folder, or the checkpoint's files uploaded together: "
                   "config.json, model.safetensors and tokenizer.json.")


def open_checkpoint(registry: ModelRegistry, files: list[str] | None, current: str | None,
                    public: bool | None = None) -> tuple[gr.Dropdown, str]:
    """Uploaded checkpoint files (or one .zip of the folder) -> a new entry in the picker:
    (the picker, the status line). public (None: as the request's budget says): a public studio's limits on
    what a model may cost."""
    if not files:
        return picker_update(registry, current), status_line(registry, current)
    public = current_budget().public if public is None else public
    folder = None
    try:
        folder = _assemble(files)
        check_before_loading(folder, public)  # sizes, depth, vocabulary and cost: nothing parsed beyond them
        # Every upload stays in memory: only the newest few are kept, so repeated uploads cannot exhaust it.
        name, new = registry.open_upload(folder, MAX_UPLOADED_MODELS)
    except (ValueError, FileNotFoundError, zipfile.BadZipFile) as exc:
        # Named as the visitor knows them: the upload's own file names, never the server's copies.
        reason = str(exc)
        if folder is not None:
            reason = reason.replace(f"{folder}{os.sep}", "").replace(str(folder), "the checkpoint")
        uploaded = ", ".join(Path(file).name for file in files)
        warn(f"Cannot open {clip(uploaded, 120)}: {reason}")
        return picker_update(registry, current), status_line(registry, current)
    finally:
        if folder is not None:  # loaded into memory (or refused): the copy on disk is not needed
            shutil.rmtree(folder.parent, ignore_errors=True)
        _discard_uploaded(files)
    if not new:  # the same model (a saved checkpoint's .zip opened again): picked, not doubled
        info(f"{name} is open already (the same weights): it is picked.")
        return picker_update(registry, name), status_line(registry, name)
    info(f"Opened {name}.")
    return picker_update(registry, name), status_line(registry, name)


def _discard_uploaded(files: list[str]) -> None:
    """Delete Gradio's copies of the uploaded files once they are read (they stayed 2 hours: 8 × 150 MB uploads
    held 1.2 GB), only where they lie in Gradio's upload folder."""
    root = upload_root()
    for file in map(Path, files):
        if file.resolve().is_relative_to(root):
            file.unlink(missing_ok=True)


def remove_stale_copies(older_than_s: float = limits.STALE_COPY_S) -> list[Path]:
    """Remove the temporary copies of uploads (checkpoints, TSVs) a studio that died left behind: a crash left
    1.1 GB in /tmp. Those newer than older_than_s may be a running studio's, and stay."""
    stale = [path for prefix in (COPY_PREFIX, UPLOAD_COPY_PREFIX)
             for path in Path(tempfile.gettempdir()).glob(f"{prefix}*")
             if path.is_dir() and time.time() - path.stat().st_mtime > older_than_s]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def _assemble(files: list[str]) -> Path:
    """Put uploaded files into one fresh folder (a single .zip is unpacked, flattened). Only the
    checkpoint's own file names are taken (never trainer.pt, never a member's folder part), each
    at most MAX_UPLOAD_BYTES, so an upload can neither write outside the folder nor fill the disk."""
    folder = Path(tempfile.mkdtemp(prefix=COPY_PREFIX)) / "uploaded-checkpoint"
    folder.mkdir()
    try:
        _copy_checkpoint_files(files, folder)
    except BaseException:
        shutil.rmtree(folder.parent, ignore_errors=True)
        raise
    return folder


def check_before_loading(folder: Path, public: bool) -> None:
    """ValueError naming what is too big in a checkpoint folder, before core parses or allocates any of it:
    config.json and the tokenizers by size, nesting, entries and longest entry; on a public studio the model by
    parameters and the cost of its step (limits.public_cost_refusal), as for a model trained there."""
    config = _small_json(folder / "config.json", limits.MAX_CONFIG_BYTES)
    for name in ("tokenizer.json", TARGET_TOKENIZER):
        if (folder / name).is_file():
            _check_tokenizer(_small_json(folder / name, limits.MAX_TOKENIZER_MB * 2**20), name)
    if public and isinstance(config, dict) and isinstance(config.get("model"), dict):
        try:
            model = ModelConfig.from_dict(config["model"])
        except (TypeError, ValueError):
            return  # core's loader names what is wrong with it
        params = parameter_count(model)
        if params > limits.PUBLIC_MAX_PARAMETERS:
            raise ValueError(f"this public studio opens models of at most {limits.PUBLIC_MAX_PARAMETERS / 1e6:.0f}M "
                             f"parameters, as it trains, and this one has {params / 1e6:,.1f}M")
        refusal = limits.public_cost_refusal(model)
        if refusal:
            raise ValueError(refusal)


def _small_json(path: Path, limit: int) -> object:
    """path's JSON, refused (ValueError) above limit bytes or MAX_JSON_DEPTH deep before it is parsed."""
    size = path.stat().st_size
    if size > limit:
        raise ValueError(f"{path.name} is {_size_words(size)}; the studio opens at most {_size_words(limit)} of it")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path.name} is not UTF-8 text") from None
    if limits.json_depth(text) > limits.MAX_JSON_DEPTH:
        raise ValueError(f"{path.name} nests more than {limits.MAX_JSON_DEPTH} levels deep; a checkpoint's "
                         f"nests 4 at most")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path.name} is not valid JSON ({clip(str(exc), 80)})") from None


def _size_words(size: int) -> str:
    return f"{size / 2**20:,.1f} MB".replace(".0 MB", " MB") if size >= 2**20 else f"{size / 2**10:,.0f} KB"


def _check_tokenizer(data: object, name: str) -> None:
    """ValueError when a tokenizer.json holds more than MAX_VOCABULARY entries or one longer than
    MAX_TOKEN_CHARS (the tokenizers library builds matchers over its added tokens: one of 150 million
    characters took 9 GB)."""
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = data.get("added_tokens") if isinstance(data, dict) else None
    if not isinstance(vocab, (dict, list)) or not isinstance(added, (list, type(None))):
        raise ValueError(f"{name} is not a tokenizer.json (no model vocabulary)")
    pieces = [entry[0] if isinstance(entry, list) and entry else entry for entry in vocab]  # Unigram: [piece, score]
    pieces += [token.get("content", "") if isinstance(token, dict) else token for token in added or []]
    if len(pieces) > limits.MAX_VOCABULARY:
        raise ValueError(f"{name} has {len(pieces):,} entries; the studio opens tokenizers of at most "
                         f"{limits.MAX_VOCABULARY:,}")
    longest = max((len(str(piece)) for piece in pieces), default=0)
    if longest > limits.MAX_TOKEN_CHARS:
        raise ValueError(f"{name} holds an entry of {longest:,} characters; the studio opens tokenizers whose "
                         f"entries have at most {limits.MAX_TOKEN_CHARS}")


def _taken(name: str) -> bool:
    """Whether an uploaded file of this name is copied: the checkpoint's own files (weights whole or in
    shards, config, tokenizers), never trainer.pt (a pickle) nor anything else."""
    return is_checkpoint_file(name) and name != TRAINER_STATE


def _copy_checkpoint_files(files: list[str], folder: Path) -> None:
    """ValueError, saying what the studio takes, unless the upload holds the checkpoint's three files (a
    sharded one's index in place of model.safetensors: its shards are checked on loading)."""
    if len(files) == 1 and not zipfile.is_zipfile(files[0]) and not _taken(Path(files[0]).name):
        broken = Path(files[0]).suffix.lower() == ".zip"
        raise ValueError(f"it is {'not a readable .zip archive' if broken else 'not a .zip'}. {UPLOAD_EXPECTED}")
    if len(files) == 1 and zipfile.is_zipfile(files[0]):
        with zipfile.ZipFile(files[0]) as archive:
            taken = _checked_members(archive)  # from the central directory, before anything is written
            unpacked = [0]  # bytes written so far, all members together
            for base, member in taken.items():
                _unzip_member(archive, member, folder / base, base, unpacked)
    else:
        taken = [file for file in map(Path, files) if _taken(file.name)]
        for file in taken:
            check_upload_size(file.stat().st_size, file.name)
        _check_upload_total(sum(file.stat().st_size for file in taken))
        for file in taken:
            shutil.copyfile(file, folder / file.name)
    missing = sorted(missing_files(folder))
    if missing:
        listed = " and ".join(filter(None, [", ".join(missing[:-1]), missing[-1]]))  # "a, b and c"
        raise ValueError(f"{listed} {'is' if len(missing) == 1 else 'are'} missing. {UPLOAD_EXPECTED}")


def _check_upload_total(size: int) -> None:
    """ValueError when an upload's checkpoint files come to more than MAX_UNPACKED_MB together (five shards under
    the per-file limit held a 243M-parameter model)."""
    if size > limits.MAX_UNPACKED_MB * 2**20:
        raise ValueError(f"its checkpoint files come to {size / 2**20:,.0f} MB; the studio accepts at most "
                         f"{limits.MAX_UNPACKED_MB} MB in all")


def _checked_members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The checkpoint's members by file name, read from the central directory alone; ValueError for a
    name given twice, entries whose data overlap, or more than MAX_UNPACKED_BYTES declared in all. A 205 KB
    zip of 20 entries sharing one 200 MiB deflate stream unpacked 4 GB before it was refused."""
    entries = sorted(archive.infolist(), key=lambda m: m.header_offset)
    for before, after in zip(entries, entries[1:]):
        # A local header is 30 bytes and the name; the data follow: the next entry may not begin inside them.
        if after.header_offset < before.header_offset + 30 + len(before.orig_filename.encode()) \
                + before.compress_size:
            raise ValueError(f"its entries {before.filename} and {after.filename} overlap (a zip bomb's trick); "
                             f"zip the folder again. {UPLOAD_EXPECTED}")
    taken: dict[str, zipfile.ZipInfo] = {}
    for member in entries:
        base = member.filename.replace("\\", "/").rsplit("/", 1)[-1]
        if _taken(base) and not member.is_dir():
            if base in taken:
                raise ValueError(f"it holds {base} twice; zip one checkpoint folder. {UPLOAD_EXPECTED}")
            check_upload_size(member.file_size, f"{base} in the .zip (unpacked)")
            taken[base] = member
    check_unpacked_size(sum(m.file_size for m in taken.values()))
    return taken


def _unzip_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, name: str,
                  unpacked: list[int]) -> None:
    """Copy one member out, counting what is written into unpacked[0] (refused past the limits, whatever
    the headers said); ValueError naming what zipfile cannot read: an encrypted member, or Deflate64, which
    Windows writes for large archives (NotImplementedError)."""
    if member.flag_bits & 0x1:  # the zip format's "encrypted" flag
        raise ValueError(f"{name} in the .zip is encrypted; zip the folder again without a password. "
                         f"{UPLOAD_EXPECTED}")
    try:
        # The declared size bounds what zipfile reads (a lying header fails its CRC); counted all the same.
        with archive.open(member) as src, open(target, "wb") as dst:
            written = 0
            while chunk := src.read(2**20):
                written, unpacked[0] = written + len(chunk), unpacked[0] + len(chunk)
                check_upload_size(written, f"{name} in the .zip (unpacked)")
                check_unpacked_size(unpacked[0])
                dst.write(chunk)
    except NotImplementedError:
        raise ValueError(f"{name} in the .zip is compressed with a method the studio cannot read; zip the "
                         f"folder again with plain deflate (e.g. python -m zipfile -c). {UPLOAD_EXPECTED}") from None
