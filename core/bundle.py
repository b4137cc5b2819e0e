"""A model together with the tokenizer it was trained with (what translation needs), and the device it runs on."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .model import Transformer
from .tokenizer import Tokenizer


@dataclass
class ModelBundle:
    model: Transformer
    tokenizer: Tokenizer
    info: dict[str, Any] = field(default_factory=dict)  # config.json: training setup, data, metrics
    path: Path | None = None  # checkpoint directory, when loaded from disk

    @property
    def name(self) -> str:
        return self.info.get("name") or (self.path.name if self.path else "in-memory model")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def new_bundle(pairs: list[tuple[str, str]], preset: str = "tiny", *, vocab_size: int = 8000,
               tokenizer_kind: str = "bpe", info: dict[str, Any] | None = None, **model_overrides: Any) -> ModelBundle:
    """A fresh, untrained model with a shared vocabulary learnt from both sides of pairs."""
    from .config import ModelConfig

    tokenizer = Tokenizer.train((text for pair in pairs for text in pair), vocab_size, tokenizer_kind)
    config = ModelConfig.from_preset(preset, src_vocab_size=tokenizer.vocab_size,
                                     tgt_vocab_size=tokenizer.vocab_size, **model_overrides)
    return ModelBundle(Transformer(config), tokenizer, dict(info or {}))


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
