"""``hf:NAME[:CONFIG]`` corpora: Hugging Face datasets, read through ``datasets``. A copy in the local
cache is read as it is, with no setting and no network (core.data.hf_disk); otherwise the Hub is asked, and
without a network this fails within seconds with a clear message (a stalled DNS lookup would otherwise
hang); with HF_HUB_OFFLINE=1, datasets looks in its caches itself. ``hf:PATH`` reads a dataset folder
on disk: a save_to_disk folder, or a folder of parquet, jsonl or csv files.
"""
from __future__ import annotations

import os
import re
import threading
import urllib.error
import urllib.request
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
from .hf_disk import datasets_cache, find_cached, read_dataset_folder

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
    elif not hub_offline() and not hub_reachable(HUB_PROBE_S):
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
    """A dataset folder on disk (core.data.hf_disk: save_to_disk, or parquet/jsonl/csv files) as a corpus; kind is
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
