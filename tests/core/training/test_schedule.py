"""Section 5.3: the learning rate's schedules (core/training/schedule.py): eq. 3, fairseq's inverse square root and a
constant rate after a linear warm-up."""
from __future__ import annotations

import pytest

from core.training.schedule import constant_lr, learning_rate
from core.training.trainer import TrainConfig


def test_learning_rate_schedules_follow_eq_3_and_fairseq():
    def noam(step):
        return learning_rate(step, schedule="noam", d_model=512, warmup=4000, factor=1.0, peak_lr=0.0)

    assert noam(4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)  # the peak, ~7.0e-4
    assert noam(1000) == pytest.approx(noam(4000) / 4)  # linear warm-up
    assert noam(16000) == pytest.approx(noam(4000) / 2)  # then step^-0.5

    def inverse(step):
        return learning_rate(step, schedule="inverse_sqrt", d_model=512, warmup=100, factor=1.0, peak_lr=5e-4)

    assert (inverse(50), inverse(100), inverse(400)) == pytest.approx((2.5e-4, 5e-4, 2.5e-4))
    with pytest.raises(ValueError, match="warmup must be at least 1 step, got 0"):
        learning_rate(10, schedule="noam", d_model=512, warmup=0, factor=1.0, peak_lr=0.0)


def test_constant_schedule_warms_up_linearly_then_stays():
    rates = [constant_lr(step, 1e-3, 4) for step in (1, 2, 4, 5, 1000)]
    assert rates == pytest.approx([2.5e-4, 5e-4, 1e-3, 1e-3, 1e-3])
    assert constant_lr(1, 1e-4, 1) == constant_lr(10**6, 1e-4, 1) == 1e-4  # --warmup 1: the tutorials' fixed rate
    rate = learning_rate(7, schedule="constant", d_model=512, warmup=10, factor=2.0, peak_lr=3e-4)
    assert rate == pytest.approx(2.1e-4)  # the factor is eq. 3's alone
    assert TrainConfig(schedule="constant").schedule == "constant"
    with pytest.raises(ValueError, match="allowed: noam, inverse_sqrt, constant"):
        TrainConfig(schedule="cosine")


def test_the_constant_schedule_drives_the_trainer():
    from tests.helpers.trainers import make_trainer

    trainer = make_trainer(steps=3, schedule="constant", warmup=2, peak_lr=1e-3)
    assert [trainer.step().lr for _ in range(3)] == pytest.approx([5e-4, 1e-3, 1e-3])
