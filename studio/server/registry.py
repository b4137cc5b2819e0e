"""The models the studio offers: checkpoints on disk plus models made in this app session.

A plain dict of names; checkpoints load on first use and stay loaded. A checkpoint of a model serving both
directions of a pair (core/data/directions.py) is offered once per direction, one model under two names:
tatoeba-en-es and tatoeba-es-en. Head ablation runs on
a private copy of a model (one per model, under its own lock), so switching heads off for
one user never changes what another user's translation sees.
"""
from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import torch

from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint
from core.model.transformer import Transformer

from .limits import BIDI_CONTROLS, MAX_LOADED_VISITOR_SAVES, MAX_NAME_CHARS, VISITOR_SAVE, clean_input

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
# The model the studio opens on: the general German->English one, which translates what a lecturer types (the
# caption model, multi30k-de-en-small, knows Flickr photos only); the first offered where it is absent.
DEFAULT_MODEL = "tatoeba-de-en"
# Multi30k-style German image descriptions for a De→En model without examples of its own, written here: none is a
# corpus sentence.
GERMAN_EXAMPLES = [
    "Ein Mann mit einem orangefarbenen Hut starrt auf etwas.",
    "Zwei junge Männer spielen Fußball auf einer Wiese.",
    "Eine Frau in einem roten Kleid geht die Straße entlang.",
    "Ein kleines Mädchen klettert in ein kleines Holzhaus.",
    "Ein brauner Hund rennt durch den Schnee.",
    "Eine Gruppe von Menschen steht vor einem großen Zelt.",
]
# What a checkpoint's corpus is, by the folder its record names, for the status line.
CORPORA = {"multi30k": "Multi30k image captions (the benchmark)", "tatoeba": "Tatoeba's everyday sentences"}
# What get() raises when a model cannot be offered: no such name, or a checkpoint that no longer loads.
UNAVAILABLE = (LookupError, ValueError, FileNotFoundError)


class ModelRegistry:
    def __init__(self, checkpoint_dir: Path | None = CHECKPOINTS):
        self._paths: dict[str, Path] = {}
        self._targets: dict[str, str] = {}  # a name offering one direction of a two-way model -> its target language
        self._loaded: dict[Path, ModelBundle] = {}  # a two-way checkpoint, loaded once for both its names
        self._bundles: dict[str, ModelBundle] = {}
        self._ablation: dict[str, tuple[Transformer, Transformer, threading.Lock]] = {}  # name -> (of, copy, lock)
        self._lock = threading.Lock()
        # open() picks a name not yet taken, then adds under it: two uploads at once took the same name.
        self._opening = threading.Lock()
        self.uploaded: list[str] = []  # names opened from visitors' uploads, least recently used first
        self._visitor_saves: list[str] = []  # loaded visitors' saves (VISITOR_SAVE), least recently used first
        self._keys: dict[str, int] = {}  # name -> serial of the model offered under it (see key())
        self._saved_as: dict[str, str] = {}  # a model held in memory -> the checkpoint of these very weights
        self._serial = 0
        if checkpoint_dir is not None and checkpoint_dir.is_dir():
            for sub in sorted(checkpoint_dir.iterdir()):
                if (sub / "config.json").is_file() and not sub.name.startswith("."):
                    self._offer_folder(sub, replace=False)

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._paths, *self._bundles]))

    def default(self) -> str | None:
        """DEFAULT_MODEL where it is offered, else the first model (None: nothing is offered)."""
        names = self.names()
        return DEFAULT_MODEL if DEFAULT_MODEL in names else next(iter(names), None)

    def choices(self) -> list[tuple[str, str]]:
        """The picker's (label, name) pairs: a model held only in memory says so, since it is gone when the
        studio stops (a training run until it is saved; an upload)."""
        def label(name: str) -> str:
            if name in self.uploaded:
                return f"{name} (uploaded)"
            if name in self._saved_as:
                return f"{name} (saved as {self._saved_as[name]})"
            held = self._bundles.get(name) if name not in self._paths else None
            return f"{name} (unsaved)" if held is not None and held.path is None else name
        return [(label(name), name) for name in self.names()]

    def add(self, name: str, bundle: ModelBundle, same_model: bool = False, saved_as: str | None = None) -> str:
        """Offer a model made in this app session (e.g. by the Train tab); replaces a same-named one.
        same_model: newer weights of the model offered under name (a training run's snapshot),
        which keeps its key(). saved_as: the checkpoint these weights were just saved to (newer
        weights added later are unsaved again)."""
        with self._lock:
            self._bundles[name] = bundle
            if saved_as:
                self._saved_as[name] = saved_as
            else:
                self._saved_as.pop(name, None)
            self._paths.pop(name, None)
            self._ablation.pop(name, None)
            if not same_model or name not in self._keys:
                self._renew(name)
        return name

    def add_folder(self, path: Path) -> str:
        """Offer a checkpoint folder saved by this app (the Train tab's Save) under its folder
        name (a model serving both directions: a name per direction); it loads on first use. Returns
        the first name."""
        with self._lock:
            names = self._offer_folder(path)
            for name in names:
                self._renew(name)
        return names[0]

    def _offer_folder(self, folder: Path, replace: bool = True) -> list[str]:
        """Offer folder under direction_names(folder); replace=False keeps a name already offered (the first
        folder found keeps it). Call with the lock held, or from __init__."""
        self._loaded.pop(folder, None)
        names = []
        for name, target in direction_names(folder).items():
            if not replace and name in self._paths:
                continue
            self._paths[name] = folder
            self._targets.pop(name, None)
            if target:
                self._targets[name] = target
            names.append(name)
        return names

    def remove(self, name: str) -> None:
        """Stop offering name (a session that picked it gets a 'no model called' message)."""
        with self._lock:
            path = self._paths.pop(name, None)
            self._targets.pop(name, None)
            if path is not None and path not in self._paths.values():
                self._loaded.pop(path, None)
            self._bundles.pop(name, None)
            self._ablation.pop(name, None)
            self._keys.pop(name, None)
            self._saved_as.pop(name, None)
            self._visitor_saves = [n for n in self._visitor_saves if n != name]

    def path_of(self, name: str) -> Path | None:
        """The checkpoint folder offered as name (None: a model held in memory only, or no such name)."""
        return self._paths.get(name)

    def languages(self, name: str | None) -> tuple[str, str] | None:
        """The (source, target) languages of the model offered as name, without loading a checkpoint: from the
        model in memory, else from its config.json (None: unknown, or a config that cannot be read)."""
        if name in self._bundles:
            info = self._bundles[name].info
        elif name in self._paths:
            try:
                info = json.loads((self._paths[name] / "config.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            if name in self._targets:  # one direction of a two-way model
                target = self._targets[name]
                return next(((s, t) for s, t in info.get("directions", []) if t == target), None)
        else:
            return None
        pair = (info.get("src_lang"), info.get("tgt_lang")) if isinstance(info, dict) else (None, None)
        return pair if None not in pair else None

    def key(self, name: str | None) -> tuple[str, int] | None:
        """The identity of the model offered as name (None: no such model). A name can be taken by
        another model (a new training run under the same name): the tabs compare keys, not names,
        to tell that the model changed."""
        return (name, self._keys.get(name, 0)) if name in self.names() else None

    def _renew(self, name: str) -> None:
        """name offers another model now; call with the lock held."""
        self._serial += 1
        self._keys[name] = self._serial

    def open(self, path: str | Path) -> str:
        """Load the checkpoint directory path now (ValueError/FileNotFoundError if it is not
        one) and offer it under a name not yet taken; the same model already offered under its
        name (a saved checkpoint's .zip opened again) is not offered twice: its name comes back."""
        return self._offer(load_checkpoint(path), Path(path).name)[0]

    def open_upload(self, path: str | Path, keep: int) -> tuple[str, bool]:
        """open() a visitor's upload: (its name, whether it is new in the picker). Uploads stay in
        memory, so only the newest `keep` are offered: older ones are removed."""
        return self._offer(load_checkpoint(path), Path(path).name, keep)  # loaded outside any lock

    def _offer(self, bundle: ModelBundle, folder: str, keep: int | None = None) -> tuple[str, bool]:
        """Offer bundle under its name, or the first free 'NAME (n)'; (the name, whether it is new).
        keep: count it among the uploads, of which the newest `keep` stay."""
        # The name comes from the (possibly uploaded) config.json: bound it like typed text.
        name = BIDI_CONTROLS.sub("", str(bundle.info.get("name") or folder))
        base = clean_input(name, MAX_NAME_CHARS)[0].strip() or "uploaded"
        name, n = base, 2
        with self._opening:
            while name in self.names():
                if self._offers(name, bundle):
                    return name, False
                name, n = f"{base} ({n})", n + 1
            self.add(name, bundle)
            if keep is None:
                return name, True
            self.uploaded.append(name)
            evicted, self.uploaded = self.uploaded[:-keep], self.uploaded[-keep:]
        for old in evicted:
            self.remove(old)
        return name, True

    def _offers(self, name: str, bundle: ModelBundle) -> bool:
        """Whether name offers this very model (a checkpoint that no longer loads offers none)."""
        try:
            return same_model(self.get(name), bundle)
        except UNAVAILABLE:
            return False

    def get(self, name: str | None) -> ModelBundle:
        """The bundle called name, loading its checkpoint on first use."""
        if not name or name not in self.names():
            raise LookupError(f"no model called {name!r}; available: {', '.join(self.names()) or 'none'}")
        with self._lock:
            if name not in self._bundles:
                self._bundles[name] = self._load(name)
            self._used(name)
            return self._bundles[name]

    def _used(self, name: str) -> None:
        """name was asked for: the most recently used of the uploads or loaded visitors' saves; past
        MAX_LOADED_VISITOR_SAVES loaded, the least recently used save is unloaded. Call with the lock held."""
        if name in self.uploaded:
            self.uploaded.remove(name)
            self.uploaded.append(name)
        if name in self._paths and self._bundles[name].info.get(VISITOR_SAVE) is True:
            if name in self._visitor_saves:
                self._visitor_saves.remove(name)
            self._visitor_saves.append(name)
            while len(self._visitor_saves) > MAX_LOADED_VISITOR_SAVES:
                old = self._visitor_saves.pop(0)
                self._bundles.pop(old, None)
                self._loaded.pop(self._paths.get(old), None)
                self._ablation.pop(old, None)

    def _load(self, name: str) -> ModelBundle:
        """The checkpoint offered as name, bound to its direction; call with the lock held."""
        path = self._paths[name]
        if name not in self._targets:
            return load_checkpoint(path)
        if path not in self._loaded:
            self._loaded[path] = load_checkpoint(path)
        return self._loaded[path].toward(self._targets[name])

    def ablation_model(self, name: str, bundle: ModelBundle | None = None) -> tuple[Transformer, threading.Lock]:
        """A private copy of bundle's model (default: the one offered as name) for head ablation, and
        the lock that guards it; one copy per name, made again when asked for other weights (a
        translation made with an earlier snapshot of a training run)."""
        bundle = bundle or self.get(name)
        with self._lock:
            held = self._ablation.get(name)
            if held is None or held[0] is not bundle.model:
                held = self._ablation[name] = (bundle.model, copy.deepcopy(bundle.model).eval(), threading.Lock())
            return held[1], held[2]


def direction_names(folder: Path) -> dict[str, str | None]:
    """The names a checkpoint folder is offered under, each with the language it translates into (None: a one-way
    model, offered as its folder's name). A two-way model's first direction keeps the folder's name, e.g.
    tatoeba-en-es; the other is named by its languages, tatoeba-es-en. An unreadable config.json is offered
    under the folder's name, and says what is wrong when it is picked."""
    try:
        directions = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("directions") or []
        directions = [(str(src), str(tgt)) for src, tgt in directions]
    except (OSError, ValueError, TypeError, AttributeError):
        directions = []
    if len(directions) < 2:
        return {folder.name: None}
    first = "-{}-{}".format(*directions[0])
    stem = folder.name.removesuffix(first)
    return {f"{stem}-{src}-{tgt}" if stem != folder.name or i else folder.name: tgt
            for i, (src, tgt) in enumerate(directions)}


def same_model(a: ModelBundle, b: ModelBundle) -> bool:
    """Equal configs, tokenizers and weights."""
    if a.model.config != b.model.config:
        return False
    pairs = ((a.tokenizer, b.tokenizer), (a.target_tokenizer, b.target_tokenizer))
    if any(x.to_json() != y.to_json() for x, y in pairs):
        return False
    theirs = b.model.state_dict()
    return all(torch.equal(t, theirs[k].to(t.device)) for k, t in a.model.state_dict().items())


def examples_for(bundle: ModelBundle) -> list[str]:
    """The model's own examples (synthetic tasks keep them in config.json), else German for De→En."""
    examples = bundle.info.get("examples")
    if isinstance(examples, list) and examples:
        return [str(e[0] if isinstance(e, (list, tuple)) else e) for e in examples][:8]
    langs = " ".join(str(bundle.info.get(k, "")) for k in ("src_lang", "source", "name", "data"))
    return GERMAN_EXAMPLES if "de" in langs.lower().replace("-", " ").split() or "de-en" in langs.lower() else []


def describe(bundle: ModelBundle) -> dict[str, str]:
    """The facts of the status line."""
    c = bundle.model.config
    return {
        "parameters": f"{bundle.model.num_parameters():,}",
        "vocab": f"{bundle.tokenizer.vocab_size:,} ({bundle.tokenizer.kind})",
        "layers": f"{c.encoder_layers}+{c.decoder_layers} layers, d_model {c.d_model}, {c.n_heads} heads",
        "device": str(bundle.device),
        "trained_on": trained_on(bundle.info),
    }


def trained_on(info: dict) -> str:
    """What the model learnt from, in words ("" when its record does not say): a model is only as general as its
    data, and the picker's names alone do not tell a caption model from an everyday one."""
    data = info.get("data") if isinstance(info.get("data"), dict) else {}
    sources = [str(data.get("source", ""))] + [str(added.get("source", "")) for added in data.get("added_training", [])
                                               if isinstance(added, dict)]
    named = [words for source in sources for key, words in CORPORA.items() if key in source.lower()]
    if not named and sources[0].startswith("synthetic:"):
        named = [f"the synthetic {sources[0].removeprefix('synthetic:')} task"]
    return " and ".join(dict.fromkeys(named))
