"""How a training step (section 5) uses the hardware, each choice beside the plain way it replaces:
mixed precision (autocast), the fused Adam of section 5.3, torch.compile (with CUDA graphs over the few
shapes of bucketed batches, core/data/batching.py), and figures kept on the device, read back every N steps.

On a GPU the host queues kernels ahead of the device; anything that reads a value back (`.item()`,
`.tolist()`, a Python `if` on a tensor) waits for the queue to drain, so a small model spends its step
waiting on the launch of the next one. FigureWindow and step_unless keep the whole step on the device.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

GPU_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
MIN_LOSS_SCALE = 1.0  # fp16: below this scale, non-finite gradients count as divergence


def resolve_amp(mode: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for fp32. 'auto' uses bf16 only where the hardware has it:
    on CPUs without native bf16 (e.g. AVX2-only) emulated bf16 is slower than fp32."""
    if mode == "off":
        return None
    if mode == "fp16":
        return torch.float16
    if mode == "bf16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if native_bf16_cpu() else None


def native_bf16_cpu() -> bool:
    """Whether this CPU computes in bf16 natively (AVX512-BF16), rather than emulating it: measured 5.3x slower
    than fp32 on an AVX2-only CPU, 1.54x faster on a Zen 4 with it."""
    return torch.cpu._is_avx512_bf16_supported()


def make_optimizer(model: nn.Module, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Section 5.3: Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9. The fused kernel updates
    all parameters in one pass (same arithmetic, far fewer memory sweeps than the default), and can
    skip an update on the device (step_unless). The paper uses no weight decay; given one, it is
    decoupled from the gradient (AdamW, as fairseq's Adam), not an L2 term that Adam would rescale."""
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9,
                            weight_decay=weight_decay, decoupled_weight_decay=True, fused=True)


def precision(amp_dtype: torch.dtype | None, device: torch.device) -> contextlib.ExitStack:
    """Autocast (--amp) and, on a GPU, the attention kernels of training and validation steps."""
    stack = contextlib.ExitStack()
    if amp_dtype is not None:
        stack.enter_context(torch.autocast(device.type, dtype=amp_dtype))
    if device.type == "cuda":
        # Not cuDNN's attention: it builds a plan for every new batch shape, and token batches (5.1)
        # keep bringing new ones (bf16 on an H100, paper-base: 0.19x fp32's speed with it, 1.08x without).
        stack.enter_context(sdpa_kernel(GPU_ATTENTION))
    return stack


def compile_objective(objective: nn.Module, *, cuda_graphs: bool) -> nn.Module:
    """torch.compile the training objective as one graph with symbolic sizes: batches of a new shape reuse
    it rather than recompiling (token batches, 5.1, bring new shapes all the time). On the grid (bucketed
    batches, Objective's grid mode) the graph is whole, with nothing read back inside it; packing's row
    counts depend on the data and break it where they are read. With cuda_graphs (mode reduce-overhead),
    each of the buckets' few shapes is recorded once as a CUDA graph and then replayed: one launch a step."""
    return torch.compile(objective, dynamic=True, mode="reduce-overhead" if cuda_graphs else None)


def step_unless(optimizer: torch.optim.Optimizer, skip: torch.Tensor) -> None:
    """optimizer.step(), skipped on the device where skip (a 0-d bool tensor) is true: fused Adam takes a
    `found_inf` flag (what GradScaler hands it in fp16), so no host sync decides whether to update."""
    optimizer.found_inf = skip.float()
    optimizer.grad_scale = None
    try:
        optimizer.step()
    finally:
        del optimizer.found_inf, optimizer.grad_scale


@dataclass
class Figures:
    """A window's figures as read back: means over its finite steps' target tokens."""

    steps: int
    loss: float
    nll: float
    accuracy: float
    grad_norm: float
    tokens_per_s: float
    padding_ratio: float
    skipped: int  # steps whose update was skipped (non-finite loss or gradients)
    bad: int  # of those, the ones that count towards max_bad_steps (not fp16's ordinary overflows)
    bad_run: int  # the longest run of consecutive bad steps, runs before the window included


class FigureWindow:
    """Section 5's running figures (loss, nll, correct tokens, gradient norm) summed on the device over the
    steps since the last read-back, and the non-finite steps counted there: read() waits for the device,
    once every N steps rather than every step."""

    def __init__(self, device: torch.device):
        self.device = device
        # loss, nll, correct, target tokens (steps of a finite loss), grad norm, steps of a finite one, skipped, bad
        self._sums = torch.zeros(8, dtype=torch.float64, device=device)
        self._run = torch.zeros((), dtype=torch.float64, device=device)  # consecutive bad steps so far
        self._worst = torch.zeros((), dtype=torch.float64, device=device)
        self._reset_host()

    def resume_run(self, bad_steps: int) -> None:
        """A resumed run's consecutive bad steps so far (Trainer.state_dict's bad_steps) go on counting."""
        self._run.fill_(bad_steps)
        self._worst.fill_(bad_steps)

    def _reset_host(self) -> None:
        self.steps, self.tokens, self.padding, self.started = 0, 0, 0.0, time.perf_counter()

    def add(self, sums: torch.Tensor, grad_norm: torch.Tensor, n_tokens: int, padding: float,
            scale: torch.Tensor | None) -> torch.Tensor:
        """One step's (loss, nll, correct) sums and gradient norm; returns the device flag 'skip this update'.
        scale: fp16's loss scale before the step (an overflow above MIN_LOSS_SCALE is the scaler's business)."""
        finite_loss, finite_grad = torch.isfinite(sums[0]), torch.isfinite(grad_norm)
        skip = ~(finite_loss & finite_grad)
        bad = skip if scale is None else ~finite_loss | (skip & (scale < MIN_LOSS_SCALE))
        # As the plain path reports them: the loss of a step whose gradients overflowed (fp16) is finite.
        kept, normed = finite_loss.double(), finite_grad.double()
        step = torch.cat([torch.nan_to_num(sums.double()) * kept, (n_tokens * kept).view(1),
                          (torch.nan_to_num(grad_norm.double()) * normed).view(1), normed.view(1),
                          skip.double().view(1), bad.double().view(1)])
        self._sums += step
        self._run = torch.where(bad, self._run + 1, torch.zeros_like(self._run))
        self._worst = torch.maximum(self._worst, self._run)
        self.steps, self.tokens, self.padding = self.steps + 1, self.tokens + n_tokens, self.padding + padding
        return skip

    def read(self, world_size: int = 1) -> Figures:
        """The window's figures (one read-back), then a fresh window; the run of bad steps carries over."""
        values = torch.cat([self._sums, self._worst.view(1)]).tolist()
        loss, nll, correct, tokens, grad_norm, finite, skipped, bad, worst = values
        elapsed = time.perf_counter() - self.started
        nan = float("nan")
        figures = Figures(steps=self.steps, loss=loss / tokens if tokens else nan, nll=nll / tokens if tokens else nan,
                          accuracy=correct / tokens if tokens else nan,
                          grad_norm=grad_norm / finite if finite else nan,
                          tokens_per_s=self.tokens * world_size / max(elapsed, 1e-9),
                          padding_ratio=self.padding / max(self.steps, 1), skipped=int(skipped), bad=int(bad),
                          bad_run=int(worst))
        self._sums.zero_()
        self._worst = self._run.clone()
        self._reset_host()
        return figures
