"""Section 5's training settings as one dataclass, checked when made: the batch size in tokens (5.1),
the optimizer's schedule (5.3), regularisation (5.4), and how a run uses its hardware (precision,
torch.compile, shape buckets, how often figures are read back from the GPU: core/training/acceleration.py).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import get_type_hints

from ..model.config import INT64_MAX
from .keep_best import check_keep_best
from .schedule import SCHEDULES

AMP_MODES = ("auto", "off", "bf16", "fp16")


@dataclass
class TrainConfig:
    max_steps: int = 1000
    max_tokens: int = 4096  # per batch, padded source or target slots (section 5.1 used 25k + 25k)
    accum: int = 1  # batches per optimizer step
    schedule: str = "noam"  # "noam" (eq. 3) | "inverse_sqrt" (fairseq) | "constant" (after warm-up)
    warmup: int = 4000
    lr_factor: float = 1.0  # multiplies eq. 3
    peak_lr: float = 5e-4  # inverse_sqrt's peak, constant's rate
    label_smoothing: float = 0.1
    weight_decay: float = 0.0
    clip_norm: float = 0.0  # 0 = no clipping
    amp: str = "auto"  # auto: bf16 on CUDA (fp16 on a GPU without bf16) and on CPUs with native bf16, else off
    compile: bool = False  # torch.compile the training step (CUDA)
    # Pad every batch's lengths up to a multiple of bucket and its rows to max_tokens // length, and train on the
    # whole grid (0: off): a few fixed shapes and no read-back in the forward pass (core/training/acceleration.py).
    bucket: int = 0
    cuda_graphs: bool = False  # with compile and bucket: replay each shape's graph as a CUDA graph
    # Steps between reading the figures (loss, accuracy, gradient norm) back from the device: 1 waits for the
    # GPU at every step; N > 1 keeps them there, and each N-th step's event holds the means since the last.
    readback_every: int = 1
    device: str = "auto"
    seed: int = 0
    eval_every: int = 0  # steps between validations (0 = never)
    bleu_sentences: int = 100  # validation sentences decoded for BLEU at each evaluation
    sample_translations: int = 3
    max_bad_steps: int = 5  # consecutive non-finite losses before giving up
    # core/training/keep_best.py: the validation metric ("bleu", "loss", "exact_match") whose best evaluation the run
    # keeps (None: none), and the evaluations without a better one after which it stops (None: never).
    keep_best: str | None = None
    patience: int | None = None

    def __post_init__(self) -> None:
        hints = _field_types()
        for f in fields(self):
            value, kind = getattr(self, f.name), hints[f.name]
            if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"TrainConfig.{f.name} must be a whole number, got {value!r}")
            if kind is float and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise ValueError(f"TrainConfig.{f.name} must be a number, got {value!r}")
            if kind is bool and not isinstance(value, bool):
                raise ValueError(f"TrainConfig.{f.name} must be true or false, got {value!r}")
        positive = ("max_steps", "max_tokens", "accum", "warmup", "lr_factor", "peak_lr", "max_bad_steps",
                    "readback_every")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"TrainConfig.{name} must be > 0, got {getattr(self, name)}")
        non_negative = ("weight_decay", "clip_norm", "eval_every", "bleu_sentences", "sample_translations", "bucket")
        for name in non_negative:
            if not getattr(self, name) >= 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.seed <= INT64_MAX:  # what torch.manual_seed takes
            raise ValueError(f"TrainConfig.seed must be from 0 to 2**63 - 1, got {self.seed}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"TrainConfig.schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        if self.amp not in AMP_MODES:
            raise ValueError(f"TrainConfig.amp {self.amp!r}; allowed: {', '.join(AMP_MODES)}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"TrainConfig.label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.cuda_graphs and not (self.compile and self.bucket):
            raise ValueError("TrainConfig.cuda_graphs needs compile and a bucket (one fixed shape per graph)")
        check_keep_best(self.keep_best, self.patience, eval_every=self.eval_every, bleu_sentences=self.bleu_sentences)


@functools.cache
def _field_types() -> dict[str, type]:
    """TrainConfig's annotations as types (under __future__ annotations they are strings)."""
    return get_type_hints(TrainConfig)
