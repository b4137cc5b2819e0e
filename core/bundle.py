"""A model together with the tokenizer it was trained with (what translation needs), the device it runs
on, and whether a model of a given size fits there to train (checked before it is built)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .batching import checked_pair
from .config import ModelConfig
from .model import Transformer
from .tokenizer import Tokenizer


@dataclass
class ModelBundle:
    model: Transformer
    tokenizer: Tokenizer
    info: dict[str, Any] = field(default_factory=dict)  # config.json: training setup, data, metrics
    path: Path | None = None  # checkpoint directory, when loaded from disk

    def __post_init__(self) -> None:
        if not isinstance(self.model, Transformer) or not isinstance(self.tokenizer, Tokenizer):
            raise TypeError(f"ModelBundle takes a core.Transformer and a core.Tokenizer, got "
                            f"{type(self.model).__name__} and {type(self.tokenizer).__name__}")
        check_tokenizer_fits(self.tokenizer, self.model.config, "the tokenizer")

    @property
    def name(self) -> str:
        return self.info.get("name") or (self.path.name if self.path else "in-memory model")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def check_tokenizer_fits(tokenizer: Tokenizer, config: ModelConfig, what: str) -> None:
    """One tokenizer serves both sides. Equal, not merely no larger: a smaller tokenizer is another
    model's, and would read every id wrongly."""
    if tokenizer.vocab_size != config.src_vocab_size or tokenizer.vocab_size != config.tgt_vocab_size:
        raise ValueError(f"{what} has {tokenizer.vocab_size} entries but the model's vocabulary is "
                         f"{config.src_vocab_size}/{config.tgt_vocab_size}: the tokenizer is not this model's")


def new_bundle(pairs: list[tuple[str, str]], preset: str = "tiny", *, vocab_size: int = 8000,
               tokenizer_kind: str = "bpe", info: dict[str, Any] | None = None, **model_overrides: Any) -> ModelBundle:
    """A fresh, untrained model with a shared vocabulary learnt from both sides of pairs."""
    texts = (text for i, pair in enumerate(pairs) for text in checked_pair(pair, i))
    tokenizer = Tokenizer.train(texts, vocab_size, tokenizer_kind)
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


BYTES_PER_PARAMETER = 16  # fp32 weights, gradients and Adam's two moments
MEMORY_SHARE = 0.6  # of the free memory a model may plan to use, leaving room for activations


def parameter_count(c: ModelConfig) -> int:
    """Parameters of core.model.Transformer(c), computed without building it."""
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
