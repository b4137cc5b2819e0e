"""Sections 3.1-3.4: the encoder-decoder Transformer.

Post-norm by default, as in the paper: each sub-layer's output is
LayerNorm(x + Dropout(Sublayer(x))) (sections 3.1 and 5.4). ``norm_first``
gives the pre-norm variant x + Dropout(Sublayer(LayerNorm(x))) with a final
LayerNorm on each stack.

Padded batches run their position-wise parts on the real tokens only (core/packing.py);
attention sees the padded grid with the padding masked, so nothing changes but the work.
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .cache import DecoderCache, KeyValue, Memory
from .config import ModelConfig
from .dropout import Dropout
from .packing import Packing
from .positional import Positions

Attention = dict[str, list[torch.Tensor]]  # "encoder" / "decoder" / "cross" -> per layer (B, h, Tq, Tk)


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

    def forward(self, y: torch.Tensor, memory: Sequence[Memory], past_kv: KeyValue | None = None,
                need_weights: bool = False, packing: Packing | None = None, past_rows: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, KeyValue, torch.Tensor | None, torch.Tensor | None]:
        # Masked self-attention (3.2.3). Targets are right-padded, so a causal mask alone
        # keeps every real position away from padding; padded positions are never scored.
        y, (self_kv, self_probs) = self.res_self(
            y, lambda h: self.self_attn(h, past_kv=past_kv, past_rows=past_rows, causal=True,
                                        need_weights=need_weights, packing=packing))
        y, (_, cross_probs) = self.res_cross(
            y, lambda h: self.cross_attn(h, memory=memory, need_weights=need_weights, packing=packing))
        y, _ = self.res_ffn(y, lambda h: (self.ffn(h),))
        return y, self_kv, self_probs, cross_probs


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        config.validate()
        self.config = c = config
        # No padding_idx: padding never reaches a layer (packing.py) or a key (masks), the Xavier init
        # below would overwrite its zero row, and the tied pre-softmax layer trains that row anyway.
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = self.src_embed if c.shared_vocab else nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.positions = Positions(c.positional, c.max_len, c.d_model)
        self.embed_dropout = Dropout(c.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        # Pre-norm leaves the last residual stream un-normalised; the usual fix is a final LayerNorm.
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self._reset_parameters()
        # Section 3.4: "we share the same weight matrix between the two embedding layers
        # and the pre-softmax linear transformation". Tied after init: one tensor, not copies. With
        # separate vocabularies (shared_vocab false) the source keeps its own table, and only the two
        # target-side matrices are shared: the paper's three-way tie rests on its shared vocabulary.
        self.generator.weight = self.tgt_embed.weight

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    # ----- pieces -----------------------------------------------------------------
    def _checked_padding(self, ids: torch.Tensor, what: str, vocab_size: int, every_row_real: bool = False
                         ) -> torch.Tensor:
        """The padding mask of a whole source or target, after named errors for what torch reports deep
        inside (nn.Embedding's 'index out of range in self') or not at all. The checks are read back
        together: on a GPU each read is a sync. Not at each decoding step, whose tokens the model chose."""
        if ids.dim() != 2 or ids.size(1) == 0:
            raise ValueError(f"{what} must be a (batch, length) tensor of token ids with at least one "
                             f"token, got shape {tuple(ids.shape)}")
        if ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"{what} must hold integer token ids (torch.long), got {ids.dtype}")
        padding = ids.eq(self.config.pad_id)
        outside, all_padding, left_padded = torch.stack([
            ((ids < 0) | (ids >= vocab_size)).any(), padding.all(dim=1).any(),
            (padding[:, :-1] & ~padding[:, 1:]).any()]).tolist()
        if outside:
            raise ValueError(f"{what} holds token ids outside the vocabulary 0..{vocab_size - 1}")
        if every_row_real and all_padding:  # every key masked: eq. 1's softmax would be 0/0
            raise ValueError(f"a {what} row is all padding (pad_id {self.config.pad_id}); every {what} "
                             f"needs at least one real token")
        # Positions count from each row's first column (3.5): a left-padded sentence would be read as
        # starting further on, and a padded target's real tokens would see padding.
        if left_padded:
            raise ValueError(f"{what} must be right-padded: a real token follows padding (pad_id "
                             f"{self.config.pad_id})")
        return padding

    def _check_length(self, ids: torch.Tensor, what: str, offset: int = 0) -> None:
        if offset + ids.size(1) > self.config.max_len:
            # Sinusoids exist for any position, but a model of learned positions (3.5) has none past max_len.
            fix = (" (its positions are learned: it has none past max_len)" if self.config.positional == "learned"
                   else " or build the model with a larger max_len")
            raise ValueError(f"{what} length {offset + ids.size(1)} exceeds the model's max_len "
                             f"{self.config.max_len} tokens; shorten the input{fix}")

    def _embed(self, ids: torch.Tensor, table: nn.Embedding, offset: int = 0, packing: Packing | None = None,
               looked_up: torch.Tensor | None = None) -> torch.Tensor:
        """looked_up: table(ids) given instead (gradient attributions, core/saliency.py)."""
        looked_up = table(ids) if looked_up is None else looked_up
        # Section 3.4: embeddings are multiplied by sqrt(d_model); 3.5: positions are added.
        x = looked_up * math.sqrt(self.config.d_model) + self.positions(offset, ids.size(1))
        return self.embed_dropout(packing.pack(x) if packing else x)

    def _encode(self, src: torch.Tensor, need_weights: bool = False, src_embeddings: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, Packing | None, list[torch.Tensor | None]]:
        """The encoder stack on the real source tokens: (rows (N, d_model), their packing or
        None when nothing is padded (rows are then (B, S, d_model)), per-layer attention)."""
        src_padding = self._checked_padding(src, "source", self.config.src_vocab_size, every_row_real=True)
        self._check_length(src, "source")
        if src_embeddings is not None and src_embeddings.shape != (*src.shape, self.config.d_model):
            raise ValueError(f"src_embeddings must be (batch, length, d_model) = {(*src.shape, self.config.d_model)} "
                             f"like src's lookup, got {tuple(src_embeddings.shape)}")
        packing = Packing.of(src_padding)
        x = self._embed(src, self.src_embed, packing=packing, looked_up=src_embeddings)
        probs = []
        for layer in self.encoder_layers:
            x, p = layer(x, src_padding, need_weights, packing)
            probs.append(p)
        return self.encoder_norm(x), packing, probs

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (B, S) -> encoder output (B, S, d_model), zeros at padding."""
        memory, packing, _ = self._encode(src, need_weights=False)
        return packing.unpack(memory) if packing else memory

    def _decode(self, tgt_in: torch.Tensor, cache: DecoderCache, need_weights: bool, packing: Packing | None = None
                ) -> tuple[torch.Tensor, list[torch.Tensor | None], list[torch.Tensor | None]]:
        """The decoder stack over tgt_in (B, T), after the cache.length tokens already in the cache.
        With `packing` (whole targets only), on the real target tokens; returns rows (N, d_model)."""
        self._check_length(tgt_in, "target", cache.length)
        y = self._embed(tgt_in, self.tgt_embed, cache.length, packing)
        self_probs, cross_probs = [], []
        for i, layer in enumerate(self.decoder_layers):
            y, cache.self_kv[i], sp, cp = layer(y, cache.memory[i], cache.self_kv[i], need_weights, packing,
                                                cache.self_rows)
            self_probs.append(sp)
            cross_probs.append(cp)
        cache.length += tgt_in.size(1)
        cache.self_rows = None  # applied by every layer's append
        return self.decoder_norm(y), self_probs, cross_probs

    def start_cache(self, src: torch.Tensor, memory: torch.Tensor, packing: Packing | None = None) -> DecoderCache:
        """Cross-attention keys/values of every decoder layer, computed once per source from the
        encoder output (B, S, d_model), or from its real-token rows laid out by `packing`."""
        padding = src.eq(self.config.pad_id)
        return DecoderCache([[layer.cross_attn.project_kv(memory, padding, packing)] for layer in self.decoder_layers],
                            [None] * len(self.decoder_layers))

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """The pre-softmax linear transformation: decoder states -> vocabulary logits."""
        return self.generator(hidden)

    # ----- whole sequences (training, teacher forcing) ------------------------------
    def _teacher_forced(self, src: torch.Tensor, tgt_in: torch.Tensor, need_weights: bool,
                        src_embeddings: torch.Tensor | None = None) -> tuple[torch.Tensor, Packing | None, Attention]:
        """Decoder states of every target position given the whole target (training): the rows
        of the real target tokens, their packing (None when nothing is padded), the attention."""
        # Right-padded: the causal mask then keeps padding unseen (3.2.3).
        tgt_padding = self._checked_padding(tgt_in, "tgt_in", self.config.tgt_vocab_size)
        if tgt_in.size(0) != src.size(0):
            raise ValueError(f"src and tgt_in must hold the same number of sentences, got {src.size(0)} "
                             f"and {tgt_in.size(0)}")
        memory, src_packing, enc_probs = self._encode(src, need_weights, src_embeddings)
        cache = self.start_cache(src, memory, src_packing)
        packing = Packing.of(tgt_padding)
        y, dec_probs, cross_probs = self._decode(tgt_in, cache, need_weights, packing)
        return y, packing, {"encoder": enc_probs, "decoder": dec_probs, "cross": cross_probs}

    def hidden(self, src: torch.Tensor, tgt_in: torch.Tensor, src_embeddings: torch.Tensor | None = None
               ) -> torch.Tensor:
        """Final decoder states of the non-pad positions of tgt_in, rows (N, d_model) in row-major
        order (the trainer projects only those). src_embeddings (B, S, d_model), if given, replaces
        the lookup of src's token embeddings (before the sqrt(d_model) scaling and the positions):
        what gradient attributions differentiate with respect to (core/saliency.py)."""
        y, packing, _ = self._teacher_forced(src, tgt_in, need_weights=False, src_embeddings=src_embeddings)
        return y.flatten(0, 1) if packing is None else y

    def hidden_grid(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Final decoder states (B, T, d_model) of every position of tgt_in, padding's too (finite, never
        scored): hidden() on the whole grid instead of the real tokens, so every tensor's shape is the batch's
        and nothing is read back from the device (no packing, whose row count depends on the data, and no
        input checks). For batches the trainer made (core/acceleration.py); the outputs are hidden()'s."""
        self._check_length(src, "source")  # shapes only: no read-back
        src_padding = src.eq(self.config.pad_id)
        x = self._embed(src, self.src_embed)
        for layer in self.encoder_layers:
            x, _ = layer(x, src_padding)
        cache = self.start_cache(src, self.encoder_norm(x))
        # Right-padded targets: the causal mask alone keeps every real position away from padding (3.2.3).
        return self._decode(tgt_in, cache, need_weights=False)[0]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                return_attention: bool = False) -> torch.Tensor | tuple[torch.Tensor, Attention]:
        """Logits (B, T, V) for tgt_in given src; with return_attention also the
        attention probabilities of every layer and head (the inspect path)."""
        y, packing, attention = self._teacher_forced(src, tgt_in, need_weights=return_attention)
        logits = self.project(packing.unpack(y) if packing else y)
        return (logits, attention) if return_attention else logits

    @torch.no_grad()
    def attention_maps(self, src: Sequence[int], tgt_in: Sequence[int]) -> dict[str, torch.Tensor]:
        """Every layer's and head's attention probabilities for one teacher-forced sentence pair (ids
        with eos; bos and the target), in eval mode: {"encoder": (L, h, S, S), "decoder": (L, h, T, T),
        "cross": (L, h, T, S)}, float32 on the CPU (what the studio draws)."""
        device, was_training = self.generator.weight.device, self.training
        self.eval()
        try:
            _, attention = self(torch.tensor([list(src)], device=device), torch.tensor([list(tgt_in)], device=device),
                                return_attention=True)
        finally:
            self.train(was_training)
        return {stack: torch.cat(layers).float().cpu() for stack, layers in attention.items()}

    # ----- one token at a time (inference) -----------------------------------------
    @torch.no_grad()
    def start_decoding(self, src: torch.Tensor | Sequence[torch.Tensor]) -> DecoderCache:
        """Encode src (B, S) once; the returned cache feeds decode_step. A list of such tensors
        (sources grouped by length) is encoded group by group, each padded only to its own
        longest source; the decoder's rows take the groups' sources in order."""
        groups = [group for group in ([src] if isinstance(src, torch.Tensor) else src) if group.size(0)]
        if not groups:
            raise ValueError("start_decoding needs at least one source sentence")
        caches = [self.start_cache(group, *self._encode(group)[:2]) for group in groups]
        return DecoderCache([[group for cache in caches for group in cache.memory[i]]
                             for i in range(len(self.decoder_layers))], [None] * len(self.decoder_layers))

    @torch.no_grad()
    def decode_step(self, tokens: torch.Tensor, cache: DecoderCache,
                    need_weights: bool = False) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Feed the newest token (B,) of each row; returns log-probabilities (B, V) of the
        next token (and, with need_weights, per-layer cross-attention (B, h, S), S the longest
        source group's length: keys a shorter group lacks get weight 0)."""
        y, _, cross_probs = self._decode(tokens[:, None], cache, need_weights)
        logits = self._step_logits(y[:, -1]).float()
        # In place (no gradients here): one (B, V) buffer instead of two, ~7% of a batched beam
        # search on a CPU (Multi30k, bench/decode.py).
        log_probs = torch.log_softmax(logits, dim=-1, out=logits)
        if need_weights:
            return log_probs, [p[:, :, -1] for p in cross_probs]
        return log_probs

    def _step_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        # A few rows on a CPU (one sentence's beam, a batch's last long sentences): the CPU GEMM
        # for hidden W^T with the (V, d_model) weight costs as much for 4 rows as for 16; W hidden^T,
        # which reads W as it lies, is 1.6-2.9x faster for 2-32 rows and equal at 128 (measured).
        if 1 < hidden.size(0) <= 64 and hidden.device.type == "cpu" and isinstance(self.generator, nn.Linear):
            return (self.generator.weight @ hidden.t()).t().contiguous()
        return self.project(hidden)

    # ----- head ablation (studio) --------------------------------------------------
    def attention_modules(self) -> dict[str, list[MultiHeadAttention]]:
        return {"encoder": [layer.self_attn for layer in self.encoder_layers],
                "decoder": [layer.self_attn for layer in self.decoder_layers],
                "cross": [layer.cross_attn for layer in self.decoder_layers]}

    @contextlib.contextmanager
    def heads_off(self, heads: dict[str, dict[int, list[int]]]) -> Iterator[None]:
        """Switch chosen heads off inside the block, e.g. {"cross": {0: [1, 3]}}: their
        contribution to Concat(head_1..head_h) W^O becomes zero."""
        modules = self.attention_modules()
        for stack, layers in heads.items():
            if stack not in modules:
                raise ValueError(f"unknown attention stack {stack!r}; allowed: {list(modules)}")
            for layer, off in layers.items():
                if not 0 <= layer < len(modules[stack]):
                    raise ValueError(f"{stack} layer {layer} out of range 0..{len(modules[stack]) - 1}")
                bad = [h for h in off if not 0 <= h < self.config.n_heads]
                if bad:
                    raise ValueError(f"head(s) {bad} out of range 0..{self.config.n_heads - 1}")
        try:
            for stack, layers in heads.items():
                for layer, off in layers.items():
                    mask = torch.ones(self.config.n_heads, device=self.generator.weight.device)
                    mask[list(off)] = 0.0
                    modules[stack][layer].head_mask = mask
            yield
        finally:
            for stack in modules.values():
                for module in stack:
                    module.head_mask = None

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # parameters() counts tied tensors once
