"""A model together with the tokenizer it was trained with (what translation needs), the device it runs
on, and whether a model of a given size fits there to train (checked before it is built)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from .data.batching import checked_pair
from .data.directions import directions_of, language_tag
from .data.tokenizer import Tokenizer
from .model.config import ModelConfig
from .model.transformer import Transformer


@dataclass
class ModelBundle:
    model: Transformer
    # The source side's tokenizer; with the paper's shared vocabulary (section 3.4) the target's too.
    tokenizer: Tokenizer
    info: dict[str, Any] = field(default_factory=dict)  # config.json: training setup, data, metrics
    path: Path | None = None  # checkpoint directory, when loaded from disk
    # The target side's own tokenizer, for a model with separate vocabularies (shared_vocab false); None:
    # shared. Read it as target_tokenizer, which is the one tokenizer when shared.
    separate_target: Tokenizer | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, Transformer) or not isinstance(self.tokenizer, Tokenizer):
            raise TypeError(f"ModelBundle takes a core.Transformer and a core.Tokenizer, got "
                            f"{type(self.model).__name__} and {type(self.tokenizer).__name__}")
        if self.separate_target is not None and not isinstance(self.separate_target, Tokenizer):
            raise TypeError(f"ModelBundle's separate_target must be a core.Tokenizer or None, got "
                            f"{type(self.separate_target).__name__}")
        check_tokenizer_fits(self.tokenizer, self.model.config, "the tokenizer", self.separate_target)

    @property
    def target_tokenizer(self) -> Tokenizer:
        """The tokenizer of the target side: what encodes references and decodes the model's outputs."""
        return self.tokenizer.base if self.separate_target is None else self.separate_target

    @property
    def directions(self) -> list[tuple[str, str]]:
        """The (source, target) languages the model translates: two for a model serving both directions."""
        return directions_of(self.info)

    def toward(self, target_lang: str | None = None) -> "ModelBundle":
        """This bundle translating into target_lang (None: the bound or first direction). A model serving both
        directions (core/data/directions.py) is bound by its tokenizer, which puts the language tag before
        every source; its info then names that direction's languages. A one-way model names its target only."""
        directions = self.directions
        targets = {tgt: src for src, tgt in directions}
        if target_lang is not None and target_lang not in targets:
            raise ValueError(f"{self.name} translates into {', '.join(targets)}, not {target_lang!r}")
        if len(directions) == 1 or (target_lang is None and self.tokenizer.prefix):
            return self
        target_lang = target_lang or directions[0][1]
        return replace(self, tokenizer=self.tokenizer.base.with_prefix(language_tag(target_lang)),
                       info={**self.info, "src_lang": targets[target_lang], "tgt_lang": target_lang,
                             "examples": self.info.get("examples_by_lang", {}).get(targets[target_lang], [])})

    @property
    def name(self) -> str:
        return self.info.get("name") or (self.path.name if self.path else "in-memory model")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def check_tokenizer_fits(tokenizer: Tokenizer, config: ModelConfig, what: str, target: Tokenizer | None = None,
                         target_what: str = "the target tokenizer") -> None:
    """tokenizer (what: its name in errors) serves the source side, and the target side too unless a separate
    target tokenizer is given, which a model with separate vocabularies needs and a shared one refuses.
    Sizes equal, not merely no larger: a smaller tokenizer is another model's, and would read every id wrongly."""
    if target is None:
        if tokenizer.vocab_size != config.src_vocab_size or tokenizer.vocab_size != config.tgt_vocab_size:
            raise ValueError(f"{what} has {tokenizer.vocab_size} entries but the model's vocabulary is "
                             f"{config.src_vocab_size}/{config.tgt_vocab_size}: the tokenizer is not this model's")
        if not config.shared_vocab:
            raise ValueError(f"{what} is the model's only tokenizer, but the model has separate source and target "
                             f"vocabularies (shared_vocab false): it needs a target tokenizer too")
        return
    if config.shared_vocab:
        raise ValueError(f"{target_what} is a second tokenizer, but the model shares one vocabulary between "
                         f"source and target (shared_vocab true, section 3.4)")
    for name, tok, size, side in ((what, tokenizer, config.src_vocab_size, "source"),
                                  (target_what, target, config.tgt_vocab_size, "target")):
        if tok.vocab_size != size:
            raise ValueError(f"{name} has {tok.vocab_size} entries but the model's {side} vocabulary is {size}: "
                             f"the tokenizer is not this model's")


def new_bundle(pairs: list[tuple[str, str]], preset: str = "tiny", *, vocab_size: int = 8000,
               tokenizer_kind: str = "bpe", info: dict[str, Any] | None = None, separate_vocab: bool = False,
               **model_overrides: Any) -> ModelBundle:
    """A fresh, untrained model with a shared vocabulary learnt from both sides of pairs (section 3.4), or with
    separate_vocab, a vocabulary of at most vocab_size for each side, learnt from that side alone."""
    pairs = [checked_pair(pair, i) for i, pair in enumerate(pairs)]
    if separate_vocab:
        source, target = (Tokenizer.train([pair[side] for pair in pairs], vocab_size, tokenizer_kind)
                          for side in (0, 1))
    else:
        source, target = Tokenizer.train((text for pair in pairs for text in pair), vocab_size, tokenizer_kind), None
    config = ModelConfig.from_preset(preset, src_vocab_size=source.vocab_size,
                                     tgt_vocab_size=(target or source).vocab_size, shared_vocab=not separate_vocab,
                                     **model_overrides)
    return ModelBundle(Transformer(config), source, dict(info or {}), separate_target=target)


def resolve_device(name: str = "auto") -> torch.device:
    """"auto" (CUDA if present, else CPU) or a torch device name; ValueError for a device this
    machine does not have, rather than a failure deep inside the first tensor copy."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        count = torch.cuda.device_count()
        if count == 0:
            raise ValueError(f"device {name!r}: no CUDA GPU is available here (torch {torch.__version__}); "
                             "use auto or cpu")
        if device.index is not None and device.index >= count:
            raise ValueError(f"device {name!r}: this machine has {count} CUDA GPU(s), cuda:0..cuda:{count - 1}")
    elif device.type != "cpu":
        raise ValueError(f"device {name!r} is not supported; use auto, cpu, cuda or cuda:N")
    return device


BYTES_PER_PARAMETER = 16  # fp32 weights, gradients and Adam's two moments
MEMORY_SHARE = 0.6  # of the free memory a model may plan to use, leaving room for activations


def parameter_count(c: ModelConfig) -> int:
    """Parameters of core.model.transformer.Transformer(c), computed without building it."""
    d, f, qk = c.d_model, c.d_ff, c.n_heads * c.key_size
    projections = 2 * qk + 2 * d  # W^Q and W^K (h * d_k wide), W^V and W^O (d_model)
    attention, ffn, norm = d * projections + (projections if c.attention_bias else 0), 2 * d * f + f + d, 2 * d
    embeddings = c.src_vocab_size * d + (0 if c.shared_vocab else c.tgt_vocab_size * d)
    embeddings += c.max_len * d if c.positional == "learned" else 0
    final_norms = 2 * norm if c.norm_first else 0
    return (embeddings + c.encoder_layers * (attention + ffn + 2 * norm)
            + c.decoder_layers * (2 * attention + ffn + 3 * norm) + final_norms)


def free_memory(device: torch.device) -> int:
    """Bytes free for a new model on device (CPU: MemAvailable of /proc/meminfo)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _count(n: float) -> str:
    """A parameter count in words: 7.6M, 361.3B, 8.4e+19 (past a trillion, digits stop helping)."""
    if n >= 1e12:
        return f"{n:.2g}"
    return f"{n / 1e9:,.1f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"


def _amount(x: float) -> str:
    return f"{x:.2g}" if x >= 1e6 else f"{x:,.1f}"


def check_fits(config: ModelConfig, device: torch.device, free: int | None = None) -> int:
    """The parameter count; ValueError when training it would not fit in memory."""
    params = parameter_count(config)
    need = params * BYTES_PER_PARAMETER
    free = free_memory(device) if free is None else free
    if need > MEMORY_SHARE * free:
        raise ValueError(f"this model has {_count(params)} parameters: training it needs about "
                         f"{_amount(need / 2**30)} GiB (weights, gradients, Adam: {BYTES_PER_PARAMETER} bytes a "
                         f"parameter, before activations), but {device.type.upper()} has {free / 2**30:,.1f} GiB "
                         f"free. Choose a smaller preset, d_model, d_ff or fewer layers.")
    return params
