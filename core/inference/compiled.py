"""A compiled decoding step (torch.compile, on first use of each shape): the decoder of section 3.1 run one
token at a time, as Transformer.decode_step runs it, but as a few fused kernels instead of ~740 small torch
operations.

Not in the paper: a speed-up of inference. One sentence's step on a CPU (its greedy row, or its beam's K
rows) is a few small matrix products; eager PyTorch spends more time dispatching operations than doing
arithmetic (docs/decoding-vs-ctranslate2.md). torch.compile's inductor fuses what lies between the products.
The weights stay the graph's inputs, not frozen in: prepacked frozen weights (inductor's `freezing`, with
dynamo's `prepare_freezing`) measured no faster here (bench/compiled_step.py) and cannot be cached on disk
("mkldnn tensors unpickleable"); as inputs, a model that trains on goes on using its graphs.

Compiled code wants fixed shapes, so the cache is static: each decoder layer's self-attention keys and
values live in a buffer of a fixed length (a bucket of TARGET_BUCKETS), the positions not written yet
masked out of eq. 1; the source's cross-attention keys and values are padded to a multiple of
SOURCE_MULTIPLE, its padding masked as usual. One compile per (rows, source length, target bucket): 10-30 s
each, kept on disk by inductor's caches (TORCHINDUCTOR_CACHE_DIR) so that a restart reuses them.

Only one source at a time goes this way; several sources (a batch) stay eager, where batching already pays
for the dispatch and rows leave the batch as sentences end (a new shape, a new compile, every time). The
eager Transformer.decode_step is the reference: `static_step` uncompiled equals it (tests/core/inference),
compiled it may round differently (bench/compiled_step.py: translations on test_2016 compared).
"""
from __future__ import annotations

import dataclasses
import math
import shutil
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F

from ..model.attention import MultiHeadAttention
from ..model.cache import DecoderCache
from ..model.transformer import Transformer

TARGET_BUCKETS = (32, 64, 128, 256, 512, 1024)  # self-attention cache lengths (clipped to the model's max_len)
SOURCE_MULTIPLE = 16  # sources padded to a multiple of this: one compile serves 16 lengths
RECOMPILES = 256


def compiler_available() -> bool:
    """inductor writes C++ for a CPU and builds it: no compiler, no compiled step (the eager one stays)."""
    return any(shutil.which(name) for name in ("g++", "c++", "clang++"))


def prepared(model: Transformer) -> "CompiledDecoding | Transformer":
    """model's compiled decoding; model itself where no C++ compiler is found. Cheap to make: the compiled
    graphs are torch's, kept for the process (and on disk), shared by every model of the same shapes
    (measured: a second wrapper, or a second model, decodes without compiling again)."""
    return CompiledDecoding(model) if compiler_available() else model


@dataclass
class StaticCache:
    """What a compiled step keeps between steps, for one source and its R decoder rows (R = 1, or a beam's K).
    The interface of DecoderCache that decoding uses: length, self_kv, select() and reorder_hypotheses()."""

    memory: list[tuple[torch.Tensor, torch.Tensor]]  # per layer, the source's cross-attention (1, h, S', d_k)
    source_keep: torch.Tensor  # (S',) bool, True at the source's real tokens
    self_kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (R, h, T', d_k); [] before the first step
    length: int = 0  # target tokens consumed so far
    rows: torch.Tensor | None = None  # which rows of self_kv the decoder's rows are now (None: all, in order)

    def reorder_hypotheses(self, rows: torch.Tensor) -> None:
        """In place, as DecoderCache.reorder_hypotheses: decoder rows become `rows` of the current ones."""
        self.rows = rows if self.rows is None else self.rows.index_select(0, rows)

    def select(self, rows: torch.Tensor, sources: torch.Tensor | None = None) -> "StaticCache":
        """As DecoderCache.select, for one source: keep/reorder rows (every kept row still reads source 0)."""
        sources = rows if sources is None else sources
        if sources.numel() and bool(sources.ne(0).any()):
            raise IndexError(f"StaticCache.select: one source (0) only; got sources {sources.tolist()}")
        kept = dataclasses.replace(self, self_kv=list(self.self_kv))
        kept.reorder_hypotheses(rows)
        return kept


def static_cache(model: Transformer, src: torch.Tensor) -> StaticCache:
    """Encode one source (1, S) and lay its cross-attention keys/values out for the compiled step."""
    memory = model.start_decoding(src).memory
    length = src.size(1)
    padded = -(-length // SOURCE_MULTIPLE) * SOURCE_MULTIPLE
    keep = F.pad(memory[0][0].padding[0].logical_not(), (0, padded - length))
    return StaticCache([tuple(F.pad(t, (0, 0, 0, padded - length)) for t in (layer[0].k, layer[0].v))
                        for layer in memory], keep, [])


def static_step(model: Transformer, tokens: torch.Tensor, position: torch.Tensor, rows: torch.Tensor,
                self_kv: Sequence[tuple[torch.Tensor, torch.Tensor]],
                memory: Sequence[tuple[torch.Tensor, torch.Tensor]], source_keep: torch.Tensor
                ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Transformer.decode_step over a static cache, every shape fixed by its inputs' (what torch.compile wants):
    the newest token (R,) of each row at `position` (a (1,) tensor, not a Python int: no recompile per step);
    rows (R,): the rows of self_kv the decoder's rows continue. Returns the next token's log-probabilities
    (R, V) and the new self_kv, with this step's keys and values written at `position`."""
    c = model.config
    length = self_kv[0][0].size(2)
    # Sections 3.4, 3.5: the embedding times sqrt(d_model), plus the position's encoding.
    y = model.tgt_embed(tokens) * math.sqrt(c.d_model) + model.positions.table.index_select(0, position)
    written = torch.arange(length, device=tokens.device) <= position  # keys of this and earlier positions (3.2.3)
    new_kv = []
    for layer, (k_past, v_past), (k_source, v_source) in zip(model.decoder_layers, self_kv, memory):
        keys, values = k_past.index_select(0, rows), v_past.index_select(0, rows)
        y, _ = layer.res_self(y, partial(_self_attention, layer.self_attn, keys=keys, values=values,
                                         position=position, written=written))
        y, _ = layer.res_cross(y, partial(_cross_attention, layer.cross_attn, keys=k_source, values=v_source,
                                          keep=source_keep))
        y, _ = layer.res_ffn(y, lambda h, ffn=layer.ffn: (ffn(h),))
        new_kv.append((keys, values))
    # The pre-softmax projection as W y^T, which reads the (V, d_model) weight as it lies: for a few rows the CPU's
    # matrix product is 2-3x faster so (core/model/step_projection.py), compiled or not.
    logits = (model.generator.weight @ model.decoder_norm(y).t()).t().float()
    return torch.log_softmax(logits, dim=-1), new_kv


def _self_attention(attention: MultiHeadAttention, h: torch.Tensor, *, keys: torch.Tensor, values: torch.Tensor,
                    position: torch.Tensor, written: torch.Tensor) -> tuple[torch.Tensor]:
    """Masked self-attention (3.2.3) of each row's newest position: its key and value written into the buffers
    (in place: they are this step's own copies), its query attending to the keys written so far."""
    rows, heads = h.size(0), attention.n_heads
    q, k, v = attention.qkv_proj(h).split(attention.widths, dim=-1)
    keys.index_copy_(2, position, k.view(rows, heads, 1, -1))
    values.index_copy_(2, position, v.view(rows, heads, 1, -1))
    context = _attend(q.view(rows, heads, 1, -1), keys, values, written, attention.d_k)
    return (attention.out_proj(context.reshape(rows, -1)),)


def _cross_attention(attention: MultiHeadAttention, h: torch.Tensor, *, keys: torch.Tensor, values: torch.Tensor,
                     keep: torch.Tensor) -> tuple[torch.Tensor]:
    """Cross-attention of the rows to their one source: its R queries attend together to the keys stored once."""
    rows = h.size(0)
    q = attention.q_proj(h).view(1, rows, attention.n_heads, -1).transpose(1, 2)
    context = _attend(q, keys, values, keep, attention.d_k)  # (1, h, R, d_v)
    return (attention.out_proj(context.transpose(1, 2).reshape(rows, -1)),)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor, d_k: int) -> torch.Tensor:
    """Eq. 1, softmax(Q K^T / sqrt(d_k)) V, over the keys where keep (Tk,) is True."""
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~keep, float("-inf"))
    return scores.softmax(dim=-1, dtype=torch.float32).to(v.dtype) @ v


class _Step(torch.nn.Module):
    """static_step of one model, as a module (torch.compile guards a module's weights by shape, not value)."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        return static_step(self.model, *inputs)


class CompiledDecoding:
    """A Transformer's decoding interface (config, start_decoding, decode_step, eval/train, parameters) whose
    one-source steps run compiled; anything else (several sources, attention weights asked for, a head switched
    off) goes to the model's eager step. core.inference.decoding's searches take it in the model's place."""

    def __init__(self, model: Transformer, compile_step: bool = True):
        self.model, self.config = model, model.config
        # A graph per (rows, source length, target bucket): a few dozen at most, past dynamo's default 8.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILES)
        self._step = torch.compile(_Step(model), dynamic=False, fullgraph=True) if compile_step \
            else partial(static_step, model)

    # What core.inference.decoding asks of a model besides the steps.
    @property
    def training(self) -> bool:
        return self.model.training

    def eval(self) -> "CompiledDecoding":
        self.model.eval()
        return self

    def train(self, mode: bool = True) -> "CompiledDecoding":
        self.model.train(mode)
        return self

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.model.parameters()

    def start_decoding(self, src: torch.Tensor | Sequence[torch.Tensor]) -> DecoderCache | StaticCache:
        groups = [g for g in ([src] if isinstance(src, torch.Tensor) else src) if g.size(0)]
        if len(groups) == 1 and groups[0].size(0) == 1 and not self._heads_off():
            return static_cache(self.model, groups[0])
        return self.model.start_decoding(src)

    def decode_step(self, tokens: torch.Tensor, cache: DecoderCache | StaticCache,
                    need_weights: bool = False) -> Any:
        if not isinstance(cache, StaticCache):
            return self.model.decode_step(tokens, cache, need_weights)
        if need_weights:
            raise ValueError("CompiledDecoding: attention weights come from the eager step (Transformer.decode_step)")
        self._make_room(cache, tokens.size(0))
        rows = cache.rows if cache.rows is not None else torch.arange(tokens.size(0), device=tokens.device)
        position = torch.tensor([cache.length], device=tokens.device)
        # Contiguous: a compiled graph is guarded on its inputs' strides (the last column of the tokens is not).
        log_probs, cache.self_kv = self._step(tokens.contiguous(), position, rows.contiguous(), cache.self_kv,
                                              cache.memory, cache.source_keep)
        cache.length += 1
        cache.rows = None
        return log_probs

    def _make_room(self, cache: StaticCache, rows: int) -> None:
        """Buffers long enough for this step's position, with one row per decoder row (beam search widens 1 row
        to K after its first step: that reordering is done here, once, rather than compiled for)."""
        c = self.config
        bucket = next((b for b in TARGET_BUCKETS if b > cache.length), c.max_len)
        bucket = min(bucket, c.max_len)
        if not cache.self_kv:
            device = cache.source_keep.device
            dtype = cache.memory[0][0].dtype
            shapes = [(rows, layer.self_attn.n_heads, bucket, width // layer.self_attn.n_heads)
                      for layer in self.model.decoder_layers for width in layer.self_attn.widths[1:]]
            empty = [torch.zeros(shape, device=device, dtype=dtype) for shape in shapes]
            cache.self_kv = list(zip(empty[0::2], empty[1::2]))
        if cache.rows is not None and cache.rows.numel() != cache.self_kv[0][0].size(0):
            cache.self_kv = [(k.index_select(0, cache.rows), v.index_select(0, cache.rows)) for k, v in cache.self_kv]
            cache.rows = None
        grow = bucket - cache.self_kv[0][0].size(2)
        if grow > 0:
            cache.self_kv = [(F.pad(k, (0, 0, 0, grow)), F.pad(v, (0, 0, 0, grow))) for k, v in cache.self_kv]

    def _heads_off(self) -> bool:
        return any(layer.self_attn.head_mask is not None or layer.cross_attn.head_mask is not None
                   for layer in self.model.decoder_layers)
