"""Section 5.4, label smoothing: "we employed label smoothing of value eps_ls = 0.1. This hurts
perplexity, as the model learns to be more unsure, but improves accuracy and BLEU score."

The target distribution puts 1 - eps on the reference token and spreads eps uniformly over
the vocabulary (the form PyTorch and fairseq use). Loss is computed on real tokens only:
the caller passes the logits of non-padding positions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from .model import Transformer


@dataclass
class LossParts:
    loss: torch.Tensor  # summed label-smoothed cross-entropy (what is optimised)
    nll: torch.Tensor  # summed negative log-likelihood (for perplexity)
    correct: torch.Tensor  # number of argmax hits (token accuracy)


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps: float) -> LossParts:
    """logits (N, V) and target (N,) of the N non-padding positions; sums, not means,
    so gradient accumulation can divide by the total token count."""
    log_probs = logits.float().log_softmax(dim=-1)
    nll = -log_probs.gather(1, target[:, None]).squeeze(1)
    uniform = -log_probs.mean(dim=-1)  # cross-entropy against the uniform distribution
    loss = (1.0 - eps) * nll + eps * uniform
    correct = (log_probs.argmax(dim=-1) == target).sum()
    return LossParts(loss.sum(), nll.detach().sum(), correct)


def smoothed_target_distribution(target: int, vocab_size: int, eps: float) -> torch.Tensor:
    """The distribution label_smoothed_loss trains towards, for plotting."""
    dist = torch.full((vocab_size,), eps / vocab_size)
    dist[target] += 1.0 - eps
    return dist


class Objective(nn.Module):
    """Loss of one batch. A module of its own so DDP and torch.compile can wrap it:
    the output layer and the loss run on real target tokens only, not on padding."""

    def __init__(self, model: "Transformer", label_smoothing: float):
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor):
        hidden = self.model.hidden(src, tgt_in)
        real = tgt_out.ne(self.model.config.pad_id)
        parts = label_smoothed_loss(self.model.project(hidden[real]), tgt_out[real], self.label_smoothing)
        return parts.loss, parts.nll, parts.correct
