"""The GPU benchmarks' code paths on the CPU (CI has no GPU): the FLOP count behind their MFU against
torch's own count of a training step, and bench/gpu_train.py and bench/lecture_gpu.py in --cpu-smoke mode."""
from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from bench import ddp_scaling, gpu_train, lecture_gpu
from bench.flops import mfu, training_flops
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from core.training.loss import Objective

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("overrides", [{}, {"d_k": 8, "shared_vocab": False, "src_vocab_size": 40}])
def test_the_flop_count_is_torchs_count_of_a_training_step(overrides):
    """A batch without padding on the grid: every matrix product of forward and backward, as FlopCounterMode
    counts them (attention over every key, as the count assumes; eq. 1 as matrix products, which it counts, not
    the CPU's fused kernel, which it does not)."""
    config = ModelConfig.from_preset("tiny", **{"src_vocab_size": 50, "tgt_vocab_size": 50, "dropout": 0.0,
                                                **overrides})
    torch.manual_seed(0)
    model = Transformer(config)
    rows, s, t = 4, 12, 9
    src, tgt = torch.randint(4, 40, (rows, s)), torch.randint(4, 50, (rows, t + 1))
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        loss, _, _ = Objective(model, 0.1, grid=True)(src, tgt[:, :-1], tgt[:, 1:])
        loss.backward()
    assert training_flops(config, rows * s, rows * t, s, t) == counter.get_total_flops()


def test_paper_base_costs_about_six_flops_per_weight_and_token():
    config = ModelConfig.from_preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000)
    per_token = training_flops(config, 25_000, 25_000, 25, 25) / 25_000
    # The tied table (one tensor) multiplies once, as the output layer; biases and LayerNorm are left out.
    weights = sum(p.numel() for p in Transformer(config).parameters())
    assert 6 * weights * 0.98 < per_token < 6 * weights * 1.1  # attention on ~25-token sentences: a few percent
    assert mfu(300_000 * per_token) == pytest.approx(300_000 * per_token / 989e12)


def test_gpu_train_cpu_smoke_runs_every_eager_variant():
    figures = gpu_train.main(["--cpu-smoke"])
    assert set(figures) == {"fp32", "bf16", "bf16 grid"}
    assert all(f["tokens_per_s"] > 0 and 0 < f["mfu"] < 1 for f in figures.values())


def test_lecture_cpu_smoke_writes_the_curve(tmp_path):
    rows = lecture_gpu.main(["--cpu-smoke", "--out", str(tmp_path)])
    assert rows and rows[-1]["train_seconds"] >= 4.0
    with open(tmp_path / "lecture.csv") as f:
        assert [r["step"] for r in csv.DictReader(f)] == [str(r["step"]) for r in rows]
    assert (tmp_path / "lecture.png").stat().st_size > 1000


def test_the_device_script_parses():
    """bench/gpu_check.sh runs once on a lent GPU machine: a syntax error there would cost the whole loan."""
    done = subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_check.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_ddp_scaling_cpu_smoke_runs_one_and_two_processes(tmp_path):
    rates = ddp_scaling.main(["--cpu-smoke", "--out", str(tmp_path / "ddp")])
    assert set(rates) == {1, 2} and all(r > 0 for r in rates.values())
