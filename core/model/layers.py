"""Sections 3.1 and 3.3: the encoder's and the decoder's layers, each sub-layer wrapped in a residual
connection, dropout and layer normalisation.

Post-norm by default, as in the paper: each sub-layer's output is LayerNorm(x + Dropout(Sublayer(x)))
(sections 3.1 and 5.4). ``norm_first`` gives the pre-norm variant x + Dropout(Sublayer(LayerNorm(x))).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .cache import KeyValue, Memory, Past
from .config import ModelConfig
from .dropout import Dropout
from .packing import Packing


class FeedForward(nn.Module):
    """Section 3.3: FFN(x) = max(0, x W1 + b1) W2 + b2."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In place: a fresh (tokens, d_ff) buffer would cost more than the max itself. On rows, not on the
        # (B, T, d_ff) view nn.Linear returns for a grid: autograd would copy the whole buffer back through
        # the view on every backward pass (a third of integrated gradients' time, bench/explain.py).
        hidden = F.relu(self.w1(x.reshape(-1, x.size(-1))), inplace=True)
        return self.w2(hidden).view(*x.shape[:-1], -1)


class Residual(nn.Module):
    """A sub-layer's residual connection, dropout and LayerNorm (sections 3.1, 5.4)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], tuple]) -> tuple[torch.Tensor, list]:
        """sublayer(x) returns (output, *extras); extras (cache, attention) pass through."""
        out, *extras = sublayer(self.norm(x) if self.norm_first else x)
        x = x + self.dropout(out)
        return (x if self.norm_first else self.norm(x)), extras


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, c.attention_dropout, bias=c.attention_bias,
                                            d_k=c.d_k)
        self.ffn = FeedForward(c.d_model, c.d_ff)
        self.res_attn = Residual(c.d_model, c.dropout, c.norm_first)
        self.res_ffn = Residual(c.d_model, c.dropout, c.norm_first)

    def forward(self, x: torch.Tensor, src_padding: torch.Tensor, need_weights: bool = False,
                packing: Packing | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        x, (_, probs) = self.res_attn(
            x, lambda h: self.self_attn(h, key_padding=src_padding, need_weights=need_weights, packing=packing))
        x, _ = self.res_ffn(x, lambda h: (self.ffn(h),))
        return x, probs


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, c.attention_dropout, bias=c.attention_bias,
                                            d_k=c.d_k)
        self.cross_attn = MultiHeadAttention(c.d_model, c.n_heads, c.attention_dropout, cross=True,
                                             bias=c.attention_bias, d_k=c.d_k)
        self.ffn = FeedForward(c.d_model, c.d_ff)
        self.res_self = Residual(c.d_model, c.dropout, c.norm_first)
        self.res_cross = Residual(c.d_model, c.dropout, c.norm_first)
        self.res_ffn = Residual(c.d_model, c.dropout, c.norm_first)

    def forward(self, y: torch.Tensor, memory: Sequence[Memory], past: Past | None = None,
                need_weights: bool = False, packing: Packing | None = None
                ) -> tuple[torch.Tensor, KeyValue, torch.Tensor | None, torch.Tensor | None]:
        """y: a whole target (teacher forcing, past None) or each row's newest token after `past` (decoding).
        Returns (y, the self-attention keys/values with the past's, self- and cross-attention probabilities)."""
        # Masked self-attention (3.2.3). Targets are right-padded, so a causal mask alone
        # keeps every real position away from padding; padded positions are never scored.
        y, (self_kv, self_probs) = self.res_self(
            y, lambda h: self.self_attn(h, past=past, causal=True, need_weights=need_weights, packing=packing))
        y, (_, cross_probs) = self.res_cross(
            y, lambda h: self.cross_attn(h, memory=memory, need_weights=need_weights, packing=packing))
        y, _ = self.res_ffn(y, lambda h: (self.ffn(h),))
        return y, self_kv, self_probs, cross_probs
