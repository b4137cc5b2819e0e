"""The arithmetic of a training step of the Transformer (sections 3.2-3.4), for model FLOPs utilisation
(MFU): the FLOPs the step's matrix products need, over what the chip could do in its time.

Forward, a weight matrix of m x n costs 2mn FLOPs per token it multiplies; backward twice that (the
gradients of the input and of the weight): 6 per weight per token, the usual 6N. The encoder's weights
multiply source tokens, the decoder's and the output layer's target tokens, cross-attention's W^K and W^V
the encoder's outputs (source tokens). Attention's QK^T and AV (eq. 1) add 2 x keys x (h d_k + d_v h)
forward per query, counted over all keys as is usual for MFU (PaLM's appendix B), a causal mask's too.
Padding, embeddings' look-ups, LayerNorm and softmax are not counted: MFU counts the model's work.
"""
from __future__ import annotations

from core.model.config import ModelConfig

H100_BF16_PEAK = 989e12  # FLOP/s: dense bf16 tensor cores, H100 SXM (NVIDIA's data sheet, without sparsity)


def weights_per_token(c: ModelConfig) -> tuple[int, int]:
    """The weights of matrix products applied to each source token and to each target token."""
    d, keys = c.d_model, c.n_heads * c.key_size  # h d_k: the width of the queries and keys
    self_attention = 2 * d * keys + 2 * d * d  # W^Q, W^K; W^V, W^O (3.2.2)
    ffn = 2 * d * c.d_ff  # W_1, W_2 (3.3)
    per_source = c.encoder_layers * (self_attention + ffn) + c.decoder_layers * (d * keys + d * d)  # + cross K, V
    per_target = c.decoder_layers * (self_attention + d * keys + d * d + ffn) + d * c.tgt_vocab_size  # cross Q, O
    return per_source, per_target


def training_flops(c: ModelConfig, src_tokens: int, tgt_tokens: int, src_len: float, tgt_len: float) -> float:
    """FLOPs of one forward and backward pass over src_tokens source and tgt_tokens target tokens, in
    sentences of src_len and tgt_len tokens on average (attention's keys)."""
    per_source, per_target = weights_per_token(c)
    width = c.n_heads * c.key_size + c.d_model  # QK^T over h d_k, AV over h d_v = d_model
    attention = (c.encoder_layers * src_tokens * src_len * width  # encoder self-attention
                 + c.decoder_layers * tgt_tokens * (tgt_len + src_len) * width)  # decoder self and cross
    return 3 * (2 * (per_source * src_tokens + per_target * tgt_tokens) + 2 * attention)


def mfu(flops_per_s: float, peak: float = H100_BF16_PEAK) -> float:
    """Model FLOPs utilisation: the share of the chip's peak that went to the model's arithmetic."""
    return flops_per_s / peak
