"""Section 5.4, label smoothing: "we employed label smoothing of value eps_ls = 0.1. This hurts
perplexity, as the model learns to be more unsure, but improves accuracy and BLEU score."

The target distribution puts 1 - eps on the reference token and spreads eps uniformly over
the whole vocabulary, as PyTorch's label_smoothing does (fairseq spreads it over the V - 1
other tokens: the reference gets eps/V more here, a negligible difference at V = 8,000). Loss
is computed on real tokens only: the caller passes the decoder states of non-padding positions.

The output layer and the loss are the largest single piece of a training step (the vocabulary
is 10-40x d_model), so training on a CPU runs them a chunk of rows at a time and never holds the
whole (tokens, vocabulary) logits matrix: less memory, and no page faults from allocating and
freeing tens of megabytes every step. A GPU computes the whole matrix in one go, up to a size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..inference import ranking

if TYPE_CHECKING:
    from ..model.transformer import Transformer

CHUNK_ELEMENTS = 1 << 22  # logits per chunk: 16 MB in fp32
WHOLE_LOGITS_MAX = 1 << 28  # on a GPU, logits up to 1 GiB in fp32 are computed whole


@dataclass
class LossParts:
    loss: torch.Tensor  # summed label-smoothed cross-entropy (what is optimised)
    nll: torch.Tensor  # summed negative log-likelihood (for perplexity)
    correct: torch.Tensor  # number of argmax hits (token accuracy)


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps: float,
                        scored: torch.Tensor | None = None) -> LossParts:
    """logits (N, V) and target (N,) of the N non-padding positions; sums, not means,
    so gradient accumulation can divide by the total token count. scored (N,) bool: which positions
    count, when padding's are given too (the grid, Objective's grid mode)."""
    log_probs = logits.float().log_softmax(dim=-1)
    nll = -log_probs.gather(1, target[:, None]).squeeze(1)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy against the uniform distribution
    loss = (1.0 - eps) * nll + eps * uniform
    hits = ranking.argmax(log_probs) == target
    if scored is not None:  # where, not a product: a padding position's values must not reach the sums
        loss, nll, hits = (torch.where(scored, t, torch.zeros_like(t)) for t in (loss, nll, hits))
    return LossParts(loss.sum(), nll.detach().sum(), hits.sum())


class _ChunkedProjectedLoss(torch.autograd.Function):
    """label_smoothed_loss(hidden @ weight.T, target), a chunk of rows at a time. Each chunk's
    gradient is taken while its logits are at hand: d loss / d logits = softmax - smoothed target."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, eps: float,
                dtype: torch.dtype, want_grad: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        vocab, chunk = weight.size(0), max(1, CHUNK_ELEMENTS // weight.size(0))
        grad_hidden = torch.empty_like(hidden) if want_grad else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if want_grad else None
        w = weight.to(dtype)
        loss, nll_sum, correct = (hidden.new_zeros((), dtype=torch.float32) for _ in range(3))
        for start in range(0, hidden.size(0), chunk):
            h, t = hidden[start:start + chunk].to(dtype), target[start:start + chunk]
            logits = (h @ w.T).float()
            best = ranking.argmax(logits)[:, None]
            best_logit, target_logit = logits.gather(1, best), logits.gather(1, t[:, None])
            mean_logit = logits.mean(dim=-1)
            # One exp per logit serves the loss and its gradient; in place, the chunk's only buffer.
            probs = torch.softmax(logits, dim=-1, out=logits)
            # log Z = logit - log p of the most probable token, whose p >= 1/V cannot underflow.
            log_z = (best_logit - probs.gather(1, best).log()).squeeze(1)
            nll = log_z - target_logit.squeeze(1)
            uniform = log_z - mean_logit  # cross-entropy against the uniform distribution
            loss += ((1.0 - eps) * nll + eps * uniform).sum()
            nll_sum += nll.sum()
            correct += (best.squeeze(1) == t).sum()
            if want_grad:
                grad = probs.sub_(eps / vocab)  # softmax - eps/V everywhere ...
                grad.scatter_add_(1, t[:, None], grad.new_full((t.size(0), 1), eps - 1.0))  # ... - (1-eps) at t
                grad = grad.to(dtype)
                grad_hidden[start:start + chunk] = grad @ w
                _accumulate(grad_weight, grad.T, h)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.weight_dtype = weight.dtype
        return loss, nll_sum, correct

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _nll: torch.Tensor, _correct: torch.Tensor) -> tuple:
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_loss, (grad_weight * grad_loss).to(ctx.weight_dtype), None, None, None, None


def _accumulate(total: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """total (fp32) += a @ b, in place when a and b are fp32 too."""
    if a.dtype == total.dtype:
        total.addmm_(a, b)
    else:
        total += a @ b


def projected_loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, eps: float) -> LossParts:
    """label_smoothed_loss(hidden @ weight.T, target) without the whole (N, V) logits matrix.
    Under autocast the matrix products run in the autocast dtype, as nn.Linear's would."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
    want_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    with torch.autocast(device, enabled=False):
        loss, nll, correct = _ChunkedProjectedLoss.apply(hidden, weight, target, eps, dtype, want_grad)
    return LossParts(loss, nll.detach(), correct.long())


def _whole_on_gpu(hidden: torch.Tensor, vocab: int) -> bool:
    return hidden.device.type != "cpu" and hidden.size(0) * vocab <= WHOLE_LOGITS_MAX


def smoothed_target_distribution(target: int, vocab_size: int, eps: float) -> torch.Tensor:
    """The distribution label_smoothed_loss trains towards, for plotting."""
    dist = torch.full((vocab_size,), eps / vocab_size)
    dist[target] += 1.0 - eps
    return dist


class Objective(nn.Module):
    """Loss of one batch. A module of its own so DDP and torch.compile can wrap it:
    the output layer and the loss run on real target tokens only, not on padding."""

    def __init__(self, model: "Transformer", label_smoothing: float, grid: bool = False):
        """grid: run on the whole padded grid, every shape the batch's and no read-back (hidden_grid; the GPU
        path over bucketed batches), instead of on the real tokens alone. The same loss, more work."""
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing
        self.grid = grid

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                tgt_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pad = self.model.config.pad_id
        # The last real input of a shorter sentence (its eos) predicts padding, which is never
        # scored; dropping it makes the decoder's rows exactly the scored positions.
        tgt_in = tgt_in.masked_fill(tgt_out.eq(pad), pad)
        if self.grid:
            logits = self.model.project(self.model.hidden_grid(src, tgt_in)).flatten(0, 1)
            parts = label_smoothed_loss(logits, tgt_out.flatten(), self.label_smoothing, tgt_out.flatten().ne(pad))
            return parts.loss, parts.nll, parts.correct
        hidden, target = self.model.hidden(src, tgt_in), tgt_out[tgt_out.ne(pad)]
        # The chunks are for CPUs, and for logits too large to hold whole (the paper's 25k-token batches
        # with a 37k vocabulary: ~4 GB, twice over with their gradient). The compiler fuses the plain form
        # itself, and on an H100 steps ran faster with it (paper-base: 1.07x fp32, 1.14x bf16; a run each).
        if torch.compiler.is_compiling() or _whole_on_gpu(hidden, self.model.config.tgt_vocab_size):
            parts = label_smoothed_loss(self.model.project(hidden), target, self.label_smoothing)
        else:
            parts = projected_loss(hidden, self.model.generator.weight, target, self.label_smoothing)
        return parts.loss, parts.nll, parts.correct
