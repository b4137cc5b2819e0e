"""Section 5.3: Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9 and the learning rate

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)        (eq. 3)

scaled by a factor (1 in the paper). fairseq's inverse square root is the option
most recipes use today: linear warm-up to a peak lr, then peak * sqrt(warmup / step).
``constant`` is what small tutorials use (a fixed Adam rate such as 1e-4): the same linear
warm-up, then the peak for good; a warm-up of 1 step gives the plain constant rate.
"""
from __future__ import annotations

SCHEDULES = ("noam", "inverse_sqrt", "constant")


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """Eq. 3 of the paper (the name comes from Noam Shazeer, who proposed it)."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def inverse_sqrt_lr(step: int, peak_lr: float, warmup: int) -> float:
    """fairseq's schedule, not the paper's: eq. 3's shape, with its peak (at step = warmup) set directly."""
    step = max(step, 1)
    return peak_lr * min(step / warmup, (warmup / step) ** 0.5)


def constant_lr(step: int, peak_lr: float, warmup: int) -> float:
    """Linear warm-up to peak_lr over `warmup` steps, then peak_lr: Adam's first updates, made from
    moment estimates of a step or two, are the ones a warm-up keeps small."""
    return peak_lr * min(max(step, 1) / warmup, 1.0)


def learning_rate(step: int, *, schedule: str, d_model: int, warmup: int, factor: float, peak_lr: float) -> float:
    """The learning rate for optimizer step number `step` (counted from 1)."""
    if warmup < 1:
        raise ValueError(f"warmup must be at least 1 step, got {warmup}")
    if schedule == "noam":
        return noam_lr(step, d_model, warmup, factor)
    if schedule == "inverse_sqrt":
        return inverse_sqrt_lr(step, peak_lr, warmup)
    if schedule == "constant":
        return constant_lr(step, peak_lr, warmup)
    raise ValueError(f"unknown lr schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
