"""Sections 3.1-3.4: the encoder-decoder Transformer.

Embeddings scaled by sqrt(d_model) plus positions (3.4, 3.5), a stack of encoder layers and one of decoder
layers (3.1, core/model/layers.py), and the pre-softmax projection tied to the embeddings (3.4). Two ways
through it, both through the same decoder stack (`decode`): whole sequences (training, teacher forcing), the
causal mask ordering the positions, and one token at a time (inference), the decoder's past kept in a cache
(core/model/cache.py; core/inference/compiled.py's static one for a compiled step).

Beside it, not in it: the input checks (core/model/checks.py), the packing of padded batches onto their real
tokens (core/model/packing.py: attention sees the padded grid with the padding masked, so nothing changes
but the work), a decoding step's faster projection on a CPU (core/model/step_projection.py), and the
studio's inspection hooks (core/explain/hooks.py).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from .cache import DecoderCache, KeyValue, Memory, Past
from .checks import check_length, checked_padding
from .config import ModelConfig
from .dropout import Dropout
from .layers import DecoderLayer, EncoderLayer
from .packing import Packing
from .positional import Positions
from .step_projection import step_logits

Attention = dict[str, list[torch.Tensor]]  # "encoder" / "decoder" / "cross" -> per layer (B, h, Tq, Tk)


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
    def _embed(self, ids: torch.Tensor, table: nn.Embedding, offset: int | torch.Tensor = 0,
               packing: Packing | None = None, looked_up: torch.Tensor | None = None) -> torch.Tensor:
        """looked_up: table(ids) given instead (gradient attributions, core/explain/saliency.py)."""
        looked_up = table(ids) if looked_up is None else looked_up
        # Section 3.4: embeddings are multiplied by sqrt(d_model); 3.5: positions are added.
        x = looked_up * math.sqrt(self.config.d_model) + self.positions(offset, ids.size(1))
        return self.embed_dropout(packing.pack(x) if packing else x)

    def _encode(self, src: torch.Tensor, need_weights: bool = False, src_embeddings: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, Packing | None, list[torch.Tensor | None]]:
        """The encoder stack on the real source tokens: (rows (N, d_model), their packing or
        None when nothing is padded (rows are then (B, S, d_model)), per-layer attention)."""
        src_padding = checked_padding(src, "source", self.config.src_vocab_size, self.config.pad_id,
                                      every_row_real=True)
        check_length(self.config, src, "source")
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

    def decode(self, tgt_in: torch.Tensor, memory: Sequence[Sequence[Memory]], *, past: Sequence[Past] | None = None,
               offset: int | torch.Tensor = 0, need_weights: bool = False, packing: Packing | None = None
               ) -> tuple[torch.Tensor, list[KeyValue], list[torch.Tensor | None], list[torch.Tensor | None]]:
        """The decoder stack (3.1) over tgt_in (B, T) at positions offset.. (an int, or a compiled step's (1,)
        tensor). memory: per layer, the encoded sources as cross-attention reads them (cross_memory).
        past: None for a whole target (teacher forcing); decoding, per layer what self-attention continues
        (DecoderCache.past(), or the compiled step's static buffers). With `packing` (whole targets only), on
        the real target tokens. Returns (final states (B, T, d_model), or rows (N, d_model) with packing;
        per layer the self-attention keys/values, past's included; self- and cross-attention probabilities)."""
        y = self._embed(tgt_in, self.tgt_embed, offset, packing)
        self_kv, self_probs, cross_probs = [], [], []
        for i, layer in enumerate(self.decoder_layers):
            y, kv, sp, cp = layer(y, memory[i], None if past is None else past[i], need_weights, packing)
            self_kv.append(kv)
            self_probs.append(sp)
            cross_probs.append(cp)
        return self.decoder_norm(y), self_kv, self_probs, cross_probs

    def cross_memory(self, src: torch.Tensor, memory: torch.Tensor, packing: Packing | None = None
                     ) -> list[list[Memory]]:
        """Cross-attention keys/values of every decoder layer, computed once per source from the
        encoder output (B, S, d_model), or from its real-token rows laid out by `packing`."""
        padding = src.eq(self.config.pad_id)
        return [[layer.cross_attn.project_kv(memory, padding, packing)] for layer in self.decoder_layers]

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """The pre-softmax linear transformation: decoder states -> vocabulary logits."""
        return self.generator(hidden)

    # ----- whole sequences (training, teacher forcing) ------------------------------
    def _teacher_forced(self, src: torch.Tensor, tgt_in: torch.Tensor, need_weights: bool,
                        src_embeddings: torch.Tensor | None = None) -> tuple[torch.Tensor, Packing | None, Attention]:
        """Decoder states of every target position given the whole target (training): the rows
        of the real target tokens, their packing (None when nothing is padded), the attention."""
        # Right-padded: the causal mask then keeps padding unseen (3.2.3).
        tgt_padding = checked_padding(tgt_in, "tgt_in", self.config.tgt_vocab_size, self.config.pad_id)
        if tgt_in.size(0) != src.size(0):
            raise ValueError(f"src and tgt_in must hold the same number of sentences, got {src.size(0)} "
                             f"and {tgt_in.size(0)}")
        memory, src_packing, enc_probs = self._encode(src, need_weights, src_embeddings)
        packing = Packing.of(tgt_padding)
        check_length(self.config, tgt_in, "target")
        y, _, dec_probs, cross_probs = self.decode(tgt_in, self.cross_memory(src, memory, src_packing),
                                                   need_weights=need_weights, packing=packing)
        return y, packing, {"encoder": enc_probs, "decoder": dec_probs, "cross": cross_probs}

    def hidden(self, src: torch.Tensor, tgt_in: torch.Tensor, src_embeddings: torch.Tensor | None = None
               ) -> torch.Tensor:
        """Final decoder states of the non-pad positions of tgt_in, rows (N, d_model) in row-major
        order (the trainer projects only those). src_embeddings (B, S, d_model), if given, replaces
        the lookup of src's token embeddings (before the sqrt(d_model) scaling and the positions):
        what gradient attributions differentiate with respect to (core/explain/saliency.py)."""
        y, packing, _ = self._teacher_forced(src, tgt_in, need_weights=False, src_embeddings=src_embeddings)
        return y.flatten(0, 1) if packing is None else y

    def hidden_grid(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Final decoder states (B, T, d_model) of every position of tgt_in, padding's too (finite, never
        scored): hidden() on the whole grid instead of the real tokens, so every tensor's shape is the batch's
        and nothing is read back from the device (no packing, whose row count depends on the data, and no
        input checks). For batches the trainer made (core/training/acceleration.py); the outputs are hidden()'s."""
        check_length(self.config, src, "source")  # shapes only: no read-back
        src_padding = src.eq(self.config.pad_id)
        x = self._embed(src, self.src_embed)
        for layer in self.encoder_layers:
            x, _ = layer(x, src_padding)
        check_length(self.config, tgt_in, "target")
        # Right-padded targets: the causal mask alone keeps every real position away from padding (3.2.3).
        return self.decode(tgt_in, self.cross_memory(src, self.encoder_norm(x)))[0]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                return_attention: bool = False) -> torch.Tensor | tuple[torch.Tensor, Attention]:
        """Logits (B, T, V) for tgt_in given src; with return_attention also the
        attention probabilities of every layer and head (the inspect path)."""
        y, packing, attention = self._teacher_forced(src, tgt_in, need_weights=return_attention)
        logits = self.project(packing.unpack(y) if packing else y)
        return (logits, attention) if return_attention else logits

    # ----- one token at a time (inference) -----------------------------------------
    @torch.no_grad()
    def start_decoding(self, src: torch.Tensor | Sequence[torch.Tensor]) -> DecoderCache:
        """Encode src (B, S) once; the returned cache feeds decode_step. A list of such tensors
        (sources grouped by length) is encoded group by group, each padded only to its own
        longest source; the decoder's rows take the groups' sources in order."""
        groups = [group for group in ([src] if isinstance(src, torch.Tensor) else src) if group.size(0)]
        if not groups:
            raise ValueError("start_decoding needs at least one source sentence")
        memories = [self.cross_memory(group, *self._encode(group)[:2]) for group in groups]
        return DecoderCache([[group for memory in memories for group in memory[i]]
                             for i in range(len(self.decoder_layers))], [None] * len(self.decoder_layers))

    @torch.no_grad()
    def decode_step(self, tokens: torch.Tensor, cache: DecoderCache,
                    need_weights: bool = False) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Feed the newest token (B,) of each row; returns log-probabilities (B, V) of the
        next token (and, with need_weights, per-layer cross-attention (B, h, S), S the longest
        source group's length: keys a shorter group lacks get weight 0)."""
        check_length(self.config, tokens[:, None], "target", cache.length)
        y, cache.self_kv, _, cross_probs = self.decode(tokens[:, None], cache.memory, past=cache.past(),
                                                       offset=cache.length, need_weights=need_weights)
        cache.length += 1
        cache.self_rows = None  # applied by every layer's extend
        logits = step_logits(self.generator, y[:, -1]).float()
        # In place (no gradients here): one (B, V) buffer instead of two, ~7% of a batched beam
        # search on a CPU (Multi30k, bench/decode.py).
        log_probs = torch.log_softmax(logits, dim=-1, out=logits)
        if need_weights:
            return log_probs, [p[:, :, -1] for p in cross_probs]
        return log_probs

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # parameters() counts tied tensors once
