"""Hugging Face datasets as corpora (section 5.1's data), read through ``datasets``.

On this machine, with ``datasets``' own readers and no network, as a ``datasets.DatasetDict``:

- ``hf:PATH``, a folder written by ``save_to_disk`` (a DatasetDict, or one Dataset: its only split is train);
- ``hf:PATH``, a folder of parquet, JSON Lines or CSV files, split by their names as the Hub names them
  (``train*``, ``validation*``/``valid*``/``dev*``, ``test*``; files of no split's name are train);
- the local cache of datasets loaded before (``datasets``' cache folder, HF_DATASETS_CACHE, read as it is
  without setting HF_HUB_OFFLINE): ``cached_datasets()`` lists them, ``find_cached`` finds one by name.

From the Hub, ``hf:NAME[:CONFIG]``, when no cached copy exists: without a network this fails within seconds
with a clear message (a stalled DNS lookup would otherwise hang); with HF_HUB_OFFLINE=1 at once.
"""
from __future__ import annotations

import json
import os
import re
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus import (
    Pair,
    ParallelCorpus,
    carve_splits,
    carved_corpus,
    pick_langs,
    report_empty,
    stripped_pairs,
)

# ----- on this machine: dataset folders and the local cache ---------------------------------------
# File suffixes of the data files read, and the datasets reader ("packaged builder") of each.
DATA_FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}
SAVED_MARKERS = ("dataset_dict.json", "state.json")  # what save_to_disk writes: a DatasetDict, a Dataset
# Cache folders of datasets loaded from local files by these readers, not from the Hub: not listed.
LOCAL_BUILDERS = ("parquet", "json", "csv", "arrow", "text", "pandas")


def is_saved_dataset(folder: Path) -> bool:
    return any((folder / marker).is_file() for marker in SAVED_MARKERS)


DATA_DEPTH = 3  # folder/train.parquet, folder/data/train-0.parquet, folder/de-en/data/train.parquet


def data_files(folder: Path) -> list[Path]:
    """The parquet, JSON (Lines) and CSV files in folder or up to DATA_DEPTH - 1 folders down, hidden ones aside
    (not deeper: a dataset's files lie near its top, and hf:~ must not read a whole home folder)."""
    found = (p for depth in range(1, DATA_DEPTH + 1) for p in folder.glob("/".join(["*"] * depth)))
    return sorted(p for p in found if p.suffix in DATA_FORMATS and p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def is_dataset_folder(folder: Path) -> bool:
    """Whether folder holds a save_to_disk dataset or data files that load_dataset_folder reads."""
    return folder.is_dir() and (is_saved_dataset(folder) or bool(data_files(folder)))


def read_dataset_folder(folder: Path, spec: str) -> Any:
    """A save_to_disk folder or a folder of data files as a datasets.DatasetDict; an unreadable folder is a
    ValueError naming it by spec (what the user typed)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{spec}: no such folder")
    import datasets  # slow to import; only these paths need it

    if not is_saved_dataset(folder):
        return _load_data_files(folder, spec, datasets)
    try:
        loaded = datasets.load_from_disk(str(folder))
    except Exception as exc:  # json, arrow and fsspec errors of many types
        raise ValueError(f"{spec}: not a readable save_to_disk folder ({type(exc).__name__}: {exc})") from None
    return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict(train=loaded)


def _load_data_files(folder: Path, spec: str, datasets: Any) -> Any:
    """load_dataset(reader, data_files=...) on the folder's files, split by datasets' own name patterns."""
    from datasets.data_files import get_data_patterns, resolve_pattern

    files = data_files(folder)
    formats = sorted({DATA_FORMATS[p.suffix] for p in files})
    if not formats:
        raise ValueError(f"{spec}: neither a save_to_disk folder nor a folder of parquet, jsonl or csv files")
    if len(formats) > 1:
        raise ValueError(f"{spec}: holds files of several formats ({', '.join(formats)}); keep one")
    suffixes = [s for s, reader in DATA_FORMATS.items() if reader == formats[0]]
    try:
        by_split = {str(split): sorted({f for pattern in patterns
                                        for f in _resolved(resolve_pattern, pattern, folder, suffixes)})
                    for split, patterns in get_data_patterns(str(folder)).items()}
        return datasets.load_dataset(formats[0], data_files={s: f for s, f in by_split.items() if f})
    except Exception as exc:  # pyarrow, json and csv readers raise many types
        raise ValueError(f"{spec}: the {formats[0]} files cannot be read ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''})") from None


def _resolved(resolve_pattern: Any, pattern: str, folder: Path, suffixes: list[str]) -> list[str]:
    try:
        return resolve_pattern(pattern, str(folder), allowed_extensions=suffixes)
    except FileNotFoundError:  # no file of this split's pattern
        return []


# ----- the local cache --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CachedDataset:
    """A Hub dataset in datasets' local cache: what ``load_corpus(spec)`` reads without a network."""

    name: str  # OWNER/NAME, as on the Hub
    config: str | None  # None: the dataset's only ("default") configuration
    splits: tuple[str, ...]
    folder: Path  # the cache folder of its arrow files

    @property
    def spec(self) -> str:
        return f"hf:{self.name}" + (f":{self.config}" if self.config else "")

    def load(self) -> Any:
        """The cached splits as a datasets.DatasetDict (memory-mapped arrow files, nothing copied)."""
        import datasets

        splits = {}
        for split in self.splits:
            shards = sorted(self.folder.glob(f"*-{split}.arrow")) or sorted(self.folder.glob(f"*-{split}-*-of-*.arrow"))
            splits[split] = datasets.concatenate_datasets([datasets.Dataset.from_file(str(p)) for p in shards])
        return datasets.DatasetDict(splits)


def datasets_cache() -> Path:
    """datasets' cache folder (HF_DATASETS_CACHE, or under HF_HOME, as datasets reads them)."""
    import datasets

    return Path(datasets.config.HF_DATASETS_CACHE)


def cached_datasets(cache: Path | None = None) -> list[CachedDataset]:
    """The Hub datasets in the local cache (default: datasets_cache()) whose arrow files are all there, by
    name and configuration; of several cached versions, the newest."""
    cache = datasets_cache() if cache is None else cache
    found: dict[tuple[str, str | None], tuple[float, CachedDataset]] = {}
    # Layout: CACHE/OWNER___NAME/CONFIG/VERSION/HASH/{dataset_info.json, NAME-SPLIT[-#####-of-#####].arrow}
    for info in cache.glob("*/*/*/*/dataset_info.json"):
        folder = info.parent
        owner_name = folder.parents[2].name
        if owner_name in LOCAL_BUILDERS or owner_name.startswith("."):
            continue
        try:
            record = json.loads(info.read_text())
            splits, config = tuple(record["splits"]), str(record.get("config_name") or folder.parents[1].name)
        except (OSError, ValueError, KeyError, TypeError):  # a cache entry being written, or damaged
            continue
        if not splits or not all(_has_arrow(folder, split) for split in splits):
            continue
        entry = CachedDataset(owner_name.replace("___", "/"), None if config == "default" else config, splits, folder)
        key, mtime = (entry.name, entry.config), info.stat().st_mtime
        if key not in found or mtime > found[key][0]:
            found[key] = (mtime, entry)
    return sorted((entry for _, entry in found.values()), key=lambda e: (e.name.lower(), e.config or ""))


def _has_arrow(folder: Path, split: str) -> bool:
    return any(folder.glob(f"*-{split}.arrow")) or any(folder.glob(f"*-{split}-*-of-*.arrow"))


def find_cached(name: str, config: str | None, cache: Path | None = None) -> CachedDataset | None:
    """The cached copy of a Hub dataset (name as on the Hub, config None: its only cached one), or None.
    A dataset cached in several configurations needs one named."""
    matches = [d for d in cached_datasets(cache) if d.name.lower() == name.lower()
               and (config is None or d.config == config or (config == "default" and d.config is None))]
    if config is None and len(matches) > 1:
        configs = ", ".join(d.config or "default" for d in matches)
        raise ValueError(f"hf:{name} is cached in several configurations ({configs}); name one: hf:{name}:CONFIG")
    return matches[0] if matches else None


# ----- corpora: from a folder, the cache or the Hub -----------------------------------------------
HF_EXAMPLES = "bentrevett/multi30k, bbaaaa/iwslt14-de-en, opus_books:de-en, Helsinki-NLP/opus-100:en-es"
HF_VALID_NAMES = ("validation", "valid", "val", "dev")
HUB_PROBE_S = 3.0  # how long load_hf waits for huggingface.co before giving up


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE tells us not to ask the Hugging Face Hub (load_hf and the studio read it)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether huggingface.co answers within timeout seconds. The request runs in a
    thread because a stalled DNS lookup ignores urlopen's timeout."""
    answered = threading.Event()

    def probe() -> None:
        try:
            urllib.request.urlopen("https://huggingface.co/api/status", timeout=timeout).close()
            answered.set()
        except urllib.error.HTTPError:
            answered.set()  # an HTTP error is still an answer
        except OSError:
            pass

    threading.Thread(target=probe, daemon=True).start()
    return answered.wait(timeout)


def load_hf(name: str, config: str | None = None, src_lang: str | None = None, tgt_lang: str | None = None,
            *, seed: int = 0, valid_fraction: float | None = None) -> ParallelCorpus:
    """A Hugging Face dataset: its copy in the local cache if there is one (no network asked), else
    ``datasets.load_dataset(name, config)``. A config like "de-en" names the direction when
    src_lang/tgt_lang are None. Without network and cached copy this fails within seconds."""
    spec = f"hf:{name}" + (f":{config}" if config else "")
    hint = (f"download the data and read it as a local corpus (files:PATH: a folder of "
            f"train/val/test.{{lang}}[.gz] files or a .tsv file; hf:PATH: a save_to_disk folder or a folder of "
            f"parquet, jsonl or csv files); known datasets: {HF_EXAMPLES}")
    if not name:
        raise ValueError(f"{spec}: empty dataset name; e.g. {HF_EXAMPLES}")
    cached = find_cached(name, config)
    if cached is not None:
        try:
            dd = cached.load()
        except Exception as exc:  # arrow's errors of many types: a damaged or half-deleted cache entry
            raise ValueError(f"{spec}: the cached copy in {cached.folder} cannot be read ({type(exc).__name__}: "
                             f"{exc}); delete that folder to download it again") from None
    elif hub_offline():  # datasets' Hub client reads HF_HUB_OFFLINE once, at import: set later, it retried for 23 s
        raise ValueError(f"{spec}: HF_HUB_OFFLINE is set and the local cache ({datasets_cache()}) holds no copy; "
                         f"{hint}")
    elif not hub_reachable(HUB_PROBE_S):
        raise ValueError(f"{spec}: huggingface.co is unreachable and the local cache ({datasets_cache()}) holds no "
                         f"copy; {hint}")
    else:
        import datasets  # slow to import; only this path needs it

        try:
            dd = datasets.load_dataset(name, config)
        except Exception as exc:  # the Hub client raises many types (ConnectionError, FileNotFoundError, ...)
            raise ValueError(f"{spec}: could not load dataset {name!r} ({type(exc).__name__}: {exc}); "
                             f"{hint}") from None
    if (src_lang is None and tgt_lang is None and config
            and (m := re.fullmatch(r"([A-Za-z_]+)-([A-Za-z_]+)", config))):
        src_lang, tgt_lang = m[1], m[2]
    return corpus_from_dataset_dict(dd, src_lang, tgt_lang, spec, seed=seed, valid_fraction=valid_fraction)


def load_dataset_folder(folder: Path, src_lang: str | None = None, tgt_lang: str | None = None, *, seed: int = 0,
                        valid_fraction: float | None = None, kind: str = "hf") -> ParallelCorpus:
    """A dataset folder on disk (save_to_disk, or parquet/jsonl/csv files) as a corpus; kind is
    the spec's (hf or files), for its record. An unreadable folder is a one-line ValueError naming it."""
    dd = read_dataset_folder(folder, f"{kind}:{folder}")
    return corpus_from_dataset_dict(dd, src_lang, tgt_lang, f"{kind}:{folder.resolve()}", seed=seed,
                                    valid_fraction=valid_fraction)


def corpus_from_dataset_dict(dd: Any, src_lang: str | None, tgt_lang: str | None, source: str, *,
                             seed: int = 0, valid_fraction: float | None = None) -> ParallelCorpus:
    """A ``datasets.DatasetDict`` -> ParallelCorpus. Rows hold either a ``translation``
    dict ({"de": ..., "en": ...}) or one column per language. Splits: train; validation,
    valid, val or dev; test. A missing valid or test split is carved from train (1%; valid_fraction
    of it for a missing valid split), the other kept."""
    if "train" not in dd:
        raise ValueError(f"{source}: no train split; splits: {sorted(dd)}")
    columns = dd["train"].column_names
    if "translation" in columns:
        first = dd["train"][0]["translation"] if len(dd["train"]) else {}
        available = sorted(first)
    else:
        available = sorted(columns)
    src_lang, tgt_lang = pick_langs(available, src_lang, tgt_lang, source)

    def pairs_of(split: str) -> tuple[list[Pair], list[int]]:
        table = dd[split]
        if "translation" in columns:
            rows = table["translation"]
            src = [(row or {}).get(src_lang) or "" for row in rows]
            tgt = [(row or {}).get(tgt_lang) or "" for row in rows]
        else:
            src = [s or "" for s in table[src_lang]]
            tgt = [t or "" for t in table[tgt_lang]]
        return stripped_pairs(src, tgt)

    splits = {"valid": next((s for s in HF_VALID_NAMES if s in dd), None), "test": "test" if "test" in dd else None}
    description: dict[str, Any] = {"source": source, "format": "hf", "splits": {"train": "train", **splits}}
    train, empty_train = pairs_of("train")
    if not any(splits.values()):
        return carved_corpus(train, empty_train, src_lang, tgt_lang, description, seed, valid_fraction)
    held, empties = {}, {"train": empty_train}
    for name, split in splits.items():
        if split:
            held[name], empties[name] = pairs_of(split)
    missing = next((name for name, split in splits.items() if split is None), None)
    if missing:  # the official held-out split is kept; only the one the dataset lacks is carved from train
        try:
            train, held[missing] = carve_splits(train, seed, [valid_fraction if missing == "valid" else None])
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
        description["carved"] = {"seed": seed, missing: len(held[missing])}
        if missing == "valid" and valid_fraction is not None:
            description["carved"]["valid_fraction"] = valid_fraction
    description["counts"] = {"train": len(train), "valid": len(held["valid"]), "test": len(held["test"])}
    report_empty(description, empties)
    return ParallelCorpus(train, held["valid"], held["test"], src_lang, tgt_lang, description)
