"""Section 3.2.1, scaled dot-product attention: the one place eq. 1 is computed.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                     (eq. 1)

"We compute the dot products of the query with all keys, divide each by sqrt(d_k), and apply a softmax
function to obtain the weights on the values." Every attention of the model calls this function, apart from
the layer around it (core/model/attention.py: the projections, the heads, the masks, head ablation): the
encoder's self-attention, the decoder's masked self-attention and its cross-attention, in training, in
teacher forcing, in each eager decoding step and in the compiled one (core/inference/compiled.py).

Two ways to the same numbers: PyTorch's fused ``scaled_dot_product_attention``, and eq. 1 spelled out, which
also returns the probabilities (the inspect path the studio draws) and is the faster of the two for one query
per row on a CPU. tests/core/model/test_attention.py holds both to a plain softmax(QK^T/sqrt(d_k))V.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *,
              causal: bool = False, dropout: float = 0.0, need_weights: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Eq. 1 for every head: q (B, h, Tq, d_k), k (B, h, Tk, d_k), v (B, h, Tk, d_v) -> the context
    (B, h, Tq, d_v) and, with need_weights, the probabilities (B, h, Tq, Tk) in fp32 (else None).

    mask: bool, broadcastable to (B, h, Tq, Tk), True where a query may attend; None: everywhere.
    causal: mask is exactly the causal mask (3.2.3), which lets the fused kernel pick its fastest code.
    dropout: the probability of dropping an attention weight (0 outside training)."""
    # One query per row on a CPU (each decoding step's self-attention, greedy's cross-attention):
    # eq. 1 spelled out is 1.3-2x faster than the fused kernel, built for blocks of queries (measured).
    if need_weights or (q.size(2) == 1 and q.device.type == "cpu"):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        probs = scores.softmax(dim=-1, dtype=torch.float32)  # in fp32 under autocast too, as the fused kernel does
        context = (F.dropout(probs, dropout) if dropout else probs).to(v.dtype) @ v
        return context, (probs if need_weights else None)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else mask, dropout_p=dropout,
                                             is_causal=causal)
    return context, None
