"""A model together with the tokenizer it was trained with: what translation needs."""
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
