"""Section 3.2: scaled dot-product and multi-head attention.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                     (eq. 1)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Two paths compute the same function. The fast path calls PyTorch's fused
``scaled_dot_product_attention`` (but spells eq. 1 out for a single query per
row on a CPU, where that is faster); the inspect path spells eq. 1 out and
returns the probabilities so the studio can draw them. Tests prove them equal.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .packing import Packing


class MultiHeadAttention(nn.Module):
    """h heads of size d_k = d_model / h. Self-attention projects Q, K, V with one
    fused matrix; cross-attention projects K and V of the encoder output once."""

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float = 0.0, *, cross: bool = False):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.cross = cross
        self.attention_dropout = attention_dropout
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)  # W^O
        # (n_heads,) of 1.0 (on) / 0.0 (off), or None; set through Transformer.heads_off().
        self.head_mask: torch.Tensor | None = None

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d_model) -> (B, h, T, d_k)"""
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, memory: torch.Tensor, packing: Packing | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the encoder output (B, S, d_model), or of its real tokens (N, d_model)
        laid out by `packing`, for cross-attention: (B, h, S, d_k) each."""
        kv = self.kv_proj(memory)
        k, v = (packing.unpack(kv) if packing else kv).chunk(2, dim=-1)
        # Contiguous once here rather than copied inside every decoding step's attention.
        return self._split(k).contiguous(), self._split(v).contiguous()

    def forward(
        self,
        x: torch.Tensor,
        *,
        memory_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        past_rows: torch.Tensor | None = None,
        key_padding: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        packing: Packing | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor | None]:
        """Attend from x (B, T, d_model), or from the real tokens x (N, d_model) laid out by `packing`
        (the output then has x's shape too).

        memory_kv: precomputed encoder keys/values (cross-attention), (B', h, S, d_k) for B = G·B'
                   query rows: G consecutive rows (a sentence's beam hypotheses) share a source.
        past_kv:   self-attention keys/values of earlier positions (incremental decoding).
        past_rows: the rows of past_kv that x's rows continue (None: the same rows), e.g. after
                   beam search reordered its hypotheses.
        key_padding: (B, S) bool (B' rows for cross-attention), True where the key is padding.
        causal:    position i may attend to keys <= i only (section 3.2.3).
        Returns (output, (k, v), probabilities or None). (k, v) includes past_kv, ready to cache.
        """
        grid = packing.unpack if packing else (lambda t: t)
        if self.cross:
            k, v = memory_kv
            q = grid(self.q_proj(x))
            rows, t_query = q.shape[:2]
            if rows % k.size(0):
                raise ValueError(f"cross-attention: {rows} query rows cannot share {k.size(0)} sources "
                                 "evenly (each source needs the same number of consecutive rows)")
            # Beam search keeps each source's keys/values once for its G hypotheses (rows come
            # sentence-major): a source's G·T queries attend together, G times less memory traffic.
            q = self._split(q.reshape(k.size(0), -1, q.size(-1)))
        else:
            q, k, v = (self._split(t) for t in grid(self.qkv_proj(x)).chunk(3, dim=-1))
            if past_kv is not None:
                k, v = _append(past_kv[0], k, past_rows), _append(past_kv[1], v, past_rows)
        mask = self._mask(q.size(2), k.size(2), key_padding, causal, x.device)
        dropout = self.attention_dropout if self.training else 0.0
        # One query per row on a CPU (each decoding step's self-attention, greedy's cross-attention):
        # eq. 1 spelled out is 1.3-2x faster than the fused kernel, built for blocks of queries (measured).
        if need_weights or (q.size(2) == 1 and q.device.type == "cpu"):
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            probs = scores.softmax(dim=-1)
            context = F.dropout(probs, dropout, self.training) @ v
            probs = probs if need_weights else None
        else:
            probs = None
            # With a plain causal mask and no padding, is_causal lets PyTorch pick its fastest kernel.
            plain_causal = causal and key_padding is None and q.size(2) == k.size(2)
            context = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None if plain_causal else mask, dropout_p=dropout, is_causal=plain_causal)
        if self.head_mask is not None:
            context = context * self.head_mask.view(1, -1, 1, 1).to(context.dtype)
        b, _, t, _ = context.shape
        context = context.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head)
        if self.cross:  # back to one row per query sequence
            context = context.view(rows, t_query, -1)
            if probs is not None:
                probs = probs.unflatten(2, (-1, t_query)).transpose(1, 2).flatten(0, 1)
        output = self.out_proj(packing.pack(context) if packing else context)
        return output, (k, v), probs

    @staticmethod
    def _mask(t_query: int, t_key: int, key_padding: torch.Tensor | None, causal: bool,
              device: torch.device) -> torch.Tensor | None:
        """Boolean (B or 1, 1, Tq, Tk) mask, True = may attend; None when nothing is masked."""
        mask = None
        if key_padding is not None:
            mask = ~key_padding[:, None, None, :]
        if causal and t_query > 1:  # a single (newest) query may attend to every key
            # Query i sits at absolute position t_key - t_query + i (past keys come first).
            offset = t_key - t_query
            allowed = torch.ones(t_query, t_key, dtype=torch.bool, device=device).tril(diagonal=offset)
            mask = allowed[None, None] if mask is None else mask & allowed
        return mask


def _append(past: torch.Tensor, new: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """torch.cat([past[rows], new], dim=2) for (B, h, T, d_k) keys or values, copying past once."""
    if rows is None:
        return torch.cat([past, new], dim=2)
    out = new.new_empty(rows.size(0), past.size(1), past.size(2) + new.size(2), past.size(3))
    torch.index_select(past, 0, rows, out=out[:, :, :past.size(2)])
    out[:, :, past.size(2):] = new
    return out
