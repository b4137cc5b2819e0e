"""Sections 3.2.2-3.2.3: multi-head attention, the layer around eq. 1.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

The layer projects, splits the heads, builds the masks (padding, 3.2.3's causal mask, a static cache's
unwritten keys), switches heads off for an ablation and joins the heads; Attention itself, eq. 1, is the
kernel of core/model/scaled_dot_product.py, with its fast path and its inspect path (need_weights: the
probabilities, for the studio's views).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .cache import Memory, Past
from .packing import Packing
from .scaled_dot_product import attention


class MultiHeadAttention(nn.Module):
    """h heads; queries and keys of d_k, values of d_v = d_model / h (d_k = d_v unless given: Table 3,
    row B varies it alone). Self-attention projects Q, K, V with one fused matrix; cross-attention
    projects K and V of the encoder output once."""

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float = 0.0, *, cross: bool = False,
                 bias: bool = False, d_k: int | None = None):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads  # d_v
        self.d_k = self.d_head if d_k is None else d_k
        self.cross = cross
        self.attention_dropout = attention_dropout
        # Widths of the projected queries, keys and values, all heads side by side.
        self.widths = (n_heads * self.d_k, n_heads * self.d_k, d_model)
        if cross:
            self.q_proj = nn.Linear(d_model, self.widths[0], bias=bias)
            self.kv_proj = nn.Linear(d_model, sum(self.widths[1:]), bias=bias)
        else:
            self.qkv_proj = nn.Linear(d_model, sum(self.widths), bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O
        # (n_heads,) of 1.0 (on) / 0.0 (off), or None; set through core.explain.hooks.heads_off().
        self.head_mask: torch.Tensor | None = None

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, h * size) -> (B, h, T, size), for queries and keys (size d_k) or values (d_v)."""
        b, t, width = x.shape
        return x.view(b, t, self.n_heads, width // self.n_heads).transpose(1, 2)

    def project_kv(self, memory: torch.Tensor, padding: torch.Tensor, packing: Packing | None = None) -> Memory:
        """Keys and values of the encoder output (B, S, d_model), or of its real tokens (N, d_model)
        laid out by `packing`, for cross-attention; padding (B, S) is True at padded positions."""
        kv = self.kv_proj(memory)
        k, v = (packing.unpack(kv) if packing else kv).split(self.widths[1:], dim=-1)
        # Contiguous once here rather than copied inside every decoding step's attention.
        return Memory(self._split(k).contiguous(), self._split(v).contiguous(), padding)

    def forward(
        self,
        x: torch.Tensor,
        *,
        memory: Sequence[Memory] = (),
        past: Past | None = None,
        key_padding: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        packing: Packing | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None, torch.Tensor | None]:
        """Attend from x (B, T, d_model), or from the real tokens x (N, d_model) laid out by `packing`
        (the output then has x's shape too).

        memory:    cross-attention only: the encoded sources, in groups (see Memory); x's rows take
                   the groups' sources in order, G consecutive rows per source (a sentence's beam
                   hypotheses share its keys/values).
        past:      self-attention, decoding step by step: the earlier positions' keys/values, which
                   this step's extend (core/model/cache.py); None for a whole sequence.
        key_padding: self-attention: (B, T) bool, True where the key is padding.
        causal:    position i may attend to keys <= i only (section 3.2.3).
        Returns (output, (k, v) or None for cross-attention, probabilities or None). (k, v) includes
        the past's, ready to cache.
        """
        grid = packing.unpack if packing else (lambda t: t)
        if self.cross:
            context, probs = self._attend_memory(grid(self.q_proj(x)), memory, need_weights)
            kv = None
        else:
            q, k, v = (self._split(t) for t in grid(self.qkv_proj(x)).split(self.widths, dim=-1))
            written = None
            if past is not None:
                k, v, written = past.extend(k, v)
            mask = self._mask(q.size(2), k.size(2), key_padding, causal, x.device)
            if written is not None:  # a static cache: the keys it has not written yet are masked out too
                mask = written.view(1, 1, 1, -1) if mask is None else mask & written.view(1, 1, 1, -1)
            # With a plain causal mask and no padding, is_causal lets PyTorch pick its fastest kernel.
            plain_causal = causal and key_padding is None and written is None and q.size(2) == k.size(2)
            context, probs = attention(q, k, v, mask, causal=plain_causal, dropout=self._dropout(),
                                       need_weights=need_weights)
            context, kv = self._join_heads(self._heads_on(context)), (k, v)
        output = self.out_proj(packing.pack(context) if packing else context)
        return output, kv, probs

    def _attend_memory(self, q: torch.Tensor, memory: Sequence[Memory],
                       need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Cross-attention of queries q (rows, T, h * d_k) to each group's sources in turn."""
        rows, t_query, q_width = q.shape
        d_model = self.widths[2]
        sources = sum(group.sources for group in memory)
        if not sources or rows % sources:
            raise ValueError(f"cross-attention: {rows} query rows cannot share {sources} sources evenly "
                             "(each source needs the same number of consecutive rows)")
        per_source, width = rows // sources, max(group.k.size(2) for group in memory)
        contexts, probs = [], []
        for q_group, group in zip(q.split([g.sources * per_source for g in memory]), memory):
            # Beam search keeps each source's keys/values once for its G hypotheses (rows come
            # sentence-major): a source's G·T queries attend together, G times less memory traffic.
            q_group = self._split(q_group.reshape(group.sources, -1, q_width))
            mask = self._mask(q_group.size(2), group.k.size(2), group.padding, False, q.device)
            context, p = attention(q_group, group.k, group.v, mask, dropout=self._dropout(), need_weights=need_weights)
            contexts.append(self._join_heads(self._heads_on(context)).view(-1, t_query, d_model))
            if p is not None:  # padded to the widest group: no weight on keys a group lacks
                p = F.pad(p, (0, width - p.size(-1)))
                probs.append(p.unflatten(2, (-1, t_query)).transpose(1, 2).flatten(0, 1))
        return _cat(contexts), (_cat(probs) if need_weights else None)

    def _dropout(self) -> float:
        return self.attention_dropout if self.training else 0.0

    def _heads_on(self, context: torch.Tensor) -> torch.Tensor:
        """Head ablation (core/explain/hooks.py): a head switched off adds nothing to
        Concat(head_1, ..., head_h) W^O. context (B, h, T, d_v)."""
        if self.head_mask is None:
            return context
        return context * self.head_mask.view(1, -1, 1, 1).to(context.dtype)

    def _join_heads(self, context: torch.Tensor) -> torch.Tensor:
        """(B, h, T, d_v) -> (B, T, d_model): Concat(head_1, ..., head_h)."""
        b, _, t, _ = context.shape
        return context.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head)

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


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts)
