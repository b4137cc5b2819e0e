"""A compiled decoding step (torch.compile, on first use of each shape): the decoder of section 3.1 run one
token at a time, through the model's own layers and attention kernel as Transformer.decode_step runs it, but
as a few fused kernels instead of ~740 small torch operations.

Not in the paper: a speed-up of inference. One sentence's step on a CPU (its greedy row, or its beam's K
rows) is a few small matrix products; eager PyTorch spends more time dispatching operations than doing
arithmetic (docs/decoding-vs-ctranslate2.md). torch.compile's inductor fuses what lies between the products.
The weights stay the graph's inputs, not frozen in: prepacked frozen weights (inductor's `freezing`, with
dynamo's `prepare_freezing`) measured no faster here (bench/compiled_step.py) and cannot be cached on disk
("mkldnn tensors unpickleable"); as inputs, a model that trains on goes on using its graphs.

Compiled code wants fixed shapes, so the cache is static: each decoder layer's self-attention keys and
values live in a buffer of a fixed length (a bucket of TARGET_BUCKETS), the positions not written yet
masked out of eq. 1 (StaticPast, the self-attention's past passed in, as the eager cache passes its own);
the source's cross-attention keys and values are padded to a multiple of
SOURCE_MULTIPLE, its padding masked as usual. One compile per (rows, source length, target bucket): 10-30 s
each, kept on disk by inductor's caches (TORCHINDUCTOR_CACHE_DIR) so that a restart reuses them.

Only one source at a time goes this way; several sources (a batch) stay eager, where batching already pays
for the dispatch and rows leave the batch as sentences end (a new shape, a new compile, every time). The
eager Transformer.decode_step is the reference: `static_step` uncompiled equals it (tests/core/inference),
compiled it may round differently (bench/compiled_step.py: translations on test_2016 compared).
"""
from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F

from ..model.cache import DecoderCache, KeyValue, Memory
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

    memory: list[Memory]  # per layer, the source's cross-attention keys/values (1, h, S', d_k), padding (1, S')
    self_kv: list[KeyValue]  # per layer (R, h, T', d_k); [] before the first step
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
    grow = -(-src.size(1) // SOURCE_MULTIPLE) * SOURCE_MULTIPLE - src.size(1)
    return StaticCache([Memory(F.pad(m.k, (0, 0, 0, grow)), F.pad(m.v, (0, 0, 0, grow)),
                               F.pad(m.padding, (0, grow), value=True)) for [m] in memory], [])


@dataclass
class StaticPast:
    """A decoder layer's self-attention past in a buffer of fixed length (a core.model.cache.Past): extend()
    writes this step's keys and values at `position` of the rows the decoder's rows continue, and masks out
    the positions not written yet."""

    k: torch.Tensor  # (R', h, T', d_k)
    v: torch.Tensor
    rows: torch.Tensor  # (R,) the rows of k and v the decoder's rows continue
    position: torch.Tensor  # (1,)

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # In place, into this step's own copies of the rows: the buffers before this step stay as they were.
        keys, values = self.k.index_select(0, self.rows), self.v.index_select(0, self.rows)
        keys.index_copy_(2, self.position, k)
        values.index_copy_(2, self.position, v)
        written = torch.arange(keys.size(2), device=keys.device) <= self.position  # this and earlier positions
        return keys, values, written


def static_step(model: Transformer, tokens: torch.Tensor, position: torch.Tensor, rows: torch.Tensor,
                self_kv: Sequence[KeyValue], memory: Sequence[Memory]) -> tuple[torch.Tensor, list[KeyValue]]:
    """Transformer.decode_step over a static cache, every shape fixed by its inputs' (what torch.compile wants):
    the newest token (R,) of each row at `position` (a (1,) tensor, not a Python int: no recompile per step);
    rows (R,): the rows of self_kv the decoder's rows continue. Returns the next token's log-probabilities
    (R, V) and the new self_kv, with this step's keys and values written at `position`."""
    past = [StaticPast(k, v, rows, position) for k, v in self_kv]
    states, new_kv, _, _ = model.decode(tokens[:, None], [[group] for group in memory], past=past, offset=position)
    # The pre-softmax projection as W y^T, which reads the (V, d_model) weight as it lies: for a few rows the CPU's
    # matrix product is 2-3x faster so (core/model/step_projection.py), compiled or not.
    logits = (model.generator.weight @ states[:, -1].t()).t().float()
    return torch.log_softmax(logits, dim=-1), new_kv


class _Step(torch.nn.Module):
    """static_step of one model, as a module (torch.compile guards a module's weights by shape, not value)."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, list[KeyValue]]:
        return static_step(self.model, *inputs)


class CompiledDecoding:
    """A Transformer's decoding interface (config, start_decoding, decode_step, eval/train, parameters) whose
    one-source steps run compiled; anything else (several sources, attention weights asked for, a head switched
    off) goes to the model's eager step. core.inference's searches (greedy, beam search, sampling) take it in the
    model's place."""

    def __init__(self, model: Transformer, compile_step: bool = True):
        self.model, self.config = model, model.config
        # A graph per (rows, source length, target bucket): a few dozen at most, past dynamo's default 8.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILES)
        self._step = torch.compile(_Step(model), dynamic=False, fullgraph=True) if compile_step \
            else partial(static_step, model)

    # What the searches ask of a model besides the steps.
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
                                              cache.memory)
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
            like = cache.memory[0].k  # the device and dtype of the keys and values
            cache.self_kv = [tuple(like.new_zeros(rows, a.n_heads, bucket, size) for size in (a.d_k, a.d_head))
                             for a in (layer.self_attn for layer in self.model.decoder_layers)]
        if cache.rows is not None and cache.rows.numel() != cache.self_kv[0][0].size(0):
            cache.self_kv = [(k.index_select(0, cache.rows), v.index_select(0, cache.rows)) for k, v in cache.self_kv]
            cache.rows = None
        grow = bucket - cache.self_kv[0][0].size(2)
        if grow > 0:
            cache.self_kv = [(F.pad(k, (0, 0, 0, grow)), F.pad(v, (0, 0, 0, grow))) for k, v in cache.self_kv]

    def _heads_off(self) -> bool:
        return any(layer.self_attn.head_mask is not None or layer.cross_attn.head_mask is not None
                   for layer in self.model.decoder_layers)
