"""Where the Train tab's data may come from: the set-up panel's choice (a synthetic task, a corpus
on this machine, an uploaded TSV, a Hugging Face dataset) as a core.data.files corpus spec, and what
the studio refuses to read: paths outside its data folders, uploads it did not receive, files
that unpack past the upload limit, Hub datasets it cannot load offline. No Gradio here.
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import tempfile
import zlib
from pathlib import Path

from core.data.files import TSV_COLUMNS
from core.data.huggingface import hub_offline

from ..server import limits
from ..server.limits import check_upload_size
from ..server.slots import current_budget

ROOT = Path(__file__).resolve().parents[2]
DATA_ROOTS = (ROOT / "data", ROOT.parent / "shared" / "data")  # where typed corpus paths may point
SOURCES = ("Synthetic task", "Corpus on this machine", "Uploaded TSV", "Hugging Face dataset")
UPLOAD_COPY_PREFIX = "studio-tsv-"  # the temporary folder of an uploaded TSV's copy
HF_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?(:[A-Za-z0-9_.-]{1,64})?")


def upload_root() -> Path:
    """Where Gradio keeps uploaded files."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(root.resolve()) for root in roots)


def corpus_path_spec(text: str, roots: tuple[Path, ...] = DATA_ROOTS) -> str:
    """A typed folder or .tsv[.gz] path (optionally ending in :LANG1-LANG2, the TSV columns'
    languages) -> a files: spec; ValueError unless it lies under one of roots (relative
    paths start at the repository, or at one of roots where they exist)."""
    text = (text or "").strip()
    if not text:
        raise ValueError("Type the path of a corpus folder or a .tsv file.")
    columns = TSV_COLUMNS.fullmatch(text)
    typed, languages = (columns[1], f":{columns[2]}-{columns[3]}") if columns else (text, "")
    if "\0" in typed:  # no path holds one: the OS refused it with Python's "embedded null byte"
        raise ValueError("A path cannot hold a NUL character (\\0); type the path of a corpus folder or a .tsv file.")
    if "," in typed:  # core reads files:A,B as two aligned files: B could lie anywhere
        raise ValueError("Type one folder or .tsv path (no commas).")
    path = (ROOT / typed).resolve()
    if not _inside(path, roots):  # or from a data folder, where it exists: "multi30k" is ../shared/data/multi30k
        path = next((p for p in ((root / typed).resolve() for root in roots) if _inside(p, roots) and p.exists()),
                    None)
    if path is None:  # the folders named as the repository sees them: no server path in a refusal
        allowed = " or ".join(os.path.relpath(r, ROOT) for r in roots)
        raise ValueError(f"The studio reads corpora only from {allowed} (or an uploaded TSV); "
                         f"{text[:200]!r} is not in them (a relative path starts at the studio's folder or at one "
                         f"of them).")
    return f"files:{path}{languages}"


def uploaded_tsv_spec(upload: str | None, root: Path | None = None, public: bool | None = None) -> str:
    """An uploaded file -> a files: spec for a TSV copy of it (core reads TSV by its name). public (None: as the
    request's budget says): the copy is capped in lines, size and longest line (check_corpus_caps)."""
    if not upload:
        raise ValueError("Upload a TSV file first (one pair a line: source<TAB>target).")
    path = Path(upload).resolve()
    if not _inside(path, (root or upload_root(),)):
        raise ValueError("That file was not uploaded through the studio.")
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    # Named as uploaded, so messages about it name the user's file; core reads a TSV by its .tsv name,
    # and a spec's ',' and ':' separate files and languages.
    name = re.sub(r"[,:]", "-", Path(upload).name.removesuffix(".gz").removesuffix(".tsv")) or "uploaded"
    copy = Path(tempfile.mkdtemp(prefix=UPLOAD_COPY_PREFIX)) / f"{name}.tsv"
    try:
        _copy_capped(path, copy, gz, current_budget().public if public is None else public)
    except BaseException:
        shutil.rmtree(copy.parent, ignore_errors=True)
        raise
    return f"files:{copy}"


def discard_upload_copy(spec: str) -> None:
    """Delete the copy uploaded_tsv_spec made for spec, if it is one: once the run's corpus is read, or
    its start refused (up to MAX_UPLOAD_BYTES each; refused starts on a public studio filled /tmp)."""
    folder = Path(spec.removeprefix("files:")).parent
    if spec.startswith("files:") and folder.name.startswith(UPLOAD_COPY_PREFIX) \
            and folder.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(folder, ignore_errors=True)


def in_users_words(message: str) -> str:
    """message with the studio's copy of an uploaded TSV named as the user's file (bad.tsv, not
    /tmp/studio-tsv-gv5njwqh/bad.tsv)."""
    folder = re.escape(os.path.join(tempfile.gettempdir(), UPLOAD_COPY_PREFIX))
    return re.sub(r"(files:)?" + folder + r"[^/]*/", "", message)


def _copy_capped(src: Path, dst: Path, gz: bool, public: bool = False) -> None:
    """Copy src to dst, gunzipped when gz, refusing more than MAX_UPLOAD_BYTES (public: the corpus caps too): a
    small .gz can unpack to gigabytes, and core would read it whole into memory."""
    total, lines, line = 0, 0, 0  # bytes, newlines and the current line's bytes so far
    what = "The uploaded TSV" + (" (unpacked)" if gz else "")
    try:
        with (gzip.open(src, "rb") if gz else open(src, "rb")) as f, open(dst, "wb") as out:
            while chunk := f.read(2**20):
                total += len(chunk)
                check_upload_size(total, what)
                if public:
                    *ended, rest = chunk.split(b"\n")
                    if ended:
                        longest = max([line + len(ended[0]), len(rest)] + [len(e) for e in ended[1:]])
                        lines, line = lines + len(ended), len(rest)
                    else:
                        longest = line = line + len(rest)
                    check_corpus_caps(what, total, lines, longest)
                out.write(chunk)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(f"The uploaded file is not a valid gzip file ({exc}).") from None


def check_corpus_caps(what: str, size: int, lines: int, longest: int) -> None:
    """ValueError naming the cap a public studio's uploaded corpus is over: its size, lines or longest line."""
    if size > limits.PUBLIC_MAX_CORPUS_MB * 2**20:
        raise ValueError(f"{what} is over {limits.PUBLIC_MAX_CORPUS_MB} MB; this public studio trains on at most "
                         f"{limits.PUBLIC_MAX_CORPUS_MB} MB of text (its 15 minutes see far less).")
    if lines > limits.PUBLIC_MAX_CORPUS_LINES:
        raise ValueError(f"{what} has more than {limits.PUBLIC_MAX_CORPUS_LINES:,} lines; this public studio trains "
                         f"on at most {limits.PUBLIC_MAX_CORPUS_LINES:,} pairs (its 15 minutes see far fewer).")
    if longest > limits.PUBLIC_MAX_LINE_BYTES:
        raise ValueError(f"{what} has a line of over {limits.PUBLIC_MAX_LINE_BYTES:,} bytes; this public studio "
                         f"takes lines of at most {limits.PUBLIC_MAX_LINE_BYTES:,} (a pair is a sentence a side).")


def corpus_spec(kind: str, task: str, path: str, upload: str | None, hf_name: str,
                roots: tuple[Path, ...] = DATA_ROOTS, uploads: Path | None = None) -> str:
    """The set-up panel's data choice -> a core.data.files corpus spec (ValueError with a message)."""
    if kind == SOURCES[0]:
        return f"synthetic:{task}"
    if kind == SOURCES[1]:
        return corpus_path_spec(path, roots)
    if kind == SOURCES[2]:
        return uploaded_tsv_spec(upload, uploads)
    if kind == SOURCES[3]:
        return f"hf:{hf_dataset_name(hf_name)}"
    raise ValueError(f"Unknown data source {kind!r}; choose one of: {', '.join(SOURCES)}.")


def hf_dataset_name(text: str | None) -> str:
    """A Hub dataset id, NAME or OWNER/NAME, optionally :CONFIG; ValueError otherwise. datasets'
    load_dataset also reads local folders (relative to the working directory), so anything that
    names an existing path, or looks like one, is refused: only data/ and uploads are readable."""
    name = (text or "").strip()
    if not name:
        raise ValueError("Type a Hugging Face dataset name, e.g. bentrevett/multi30k or opus_books:de-en.")
    dataset = name.split(":", 1)[0]
    if not HF_NAME.fullmatch(name) or ".." in name or Path(dataset).exists():
        raise ValueError(f"{name[:100]!r} is not a Hugging Face dataset id (NAME or OWNER/NAME, optionally "
                         f":CONFIG); local files are read through \"{SOURCES[1]}\" or \"{SOURCES[2]}\".")
    return name


def hf_cache_dirs() -> tuple[Path, ...]:
    """Where a Hugging Face dataset can be cached: the Hub's downloads and datasets' prepared copies."""
    from huggingface_hub import constants

    prepared = os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets"
    return Path(constants.HF_HUB_CACHE), Path(prepared)


def hf_cached(dataset: str) -> bool:
    """Whether a cache holds dataset (NAME or OWNER/NAME) as datasets--OWNER--NAME or OWNER___NAME.
    Compared loosely (case, punctuation): a cached copy is never refused; a false match only means
    that the loader's own message comes instead."""
    def loose(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    key = loose(dataset)
    return any(loose(entry.name.removeprefix("datasets--")) == key
               for root in hf_cache_dirs() if root.is_dir() for entry in root.iterdir())


def check_hf_cached(spec: str) -> None:
    """Offline (the studio sets HF_HUB_OFFLINE=1), a dataset not in the cache cannot load: say so at
    once, in one line (the loader's message came seconds later and spoke of the Hub and connections)."""
    dataset = spec.removeprefix("hf:").split(":", 1)[0]
    if spec.startswith("hf:") and hub_offline() and not hf_cached(dataset):
        raise ValueError(f"the Hugging Face dataset {dataset} is not in this machine's Hugging Face cache, and the "
                         f"studio runs offline; for other data use \"{SOURCES[1]}\" or \"{SOURCES[2]}\".")
