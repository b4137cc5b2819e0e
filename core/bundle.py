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
