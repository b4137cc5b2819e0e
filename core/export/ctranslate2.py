"""Our Transformer (sections 3.1-3.5) as a CTranslate2 model: a ``ctranslate2.specs.TransformerSpec`` filled
with our weights, saved with the vocabularies, then checked by translating with it.

How the spec must be filled for the model to compute exactly our function (teacher-forced log-probs agree to
~1e-6 on the shipped model):
- post-norm (pre_norm=False) as in section 3.1, or pre-norm with its final LayerNorms; LayerNorm eps 1e-5;
- embeddings scaled by sqrt(d_model) (3.4) and the positional table given explicitly (3.5): ours interleaves
  sin and cos, CTranslate2's built-in sinusoids put them in halves; a learned table goes the same way;
- self-attention's fused W^Q|W^K|W^V is linear[0], W^O linear[1]; cross-attention's W^Q is linear[0], the
  fused W^K|W^V linear[1], W^O linear[2]; FFN W1, W2 are linear_0, linear_1 (3.3, ReLU);
- the sources end with <eos> (add_source_eos) and the decoder starts from <bos>.
CTranslate2's only length penalty, log P / |Y|^alpha with eos counted, is ours "plain".
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..export import CHECK_OPTIONS, ExportError, check_sentences, mismatch, our_outputs, vocabulary, write_checked
from ..inference.options import DecodeOptions
from ..inference.translation import max_output_length, prepare_source, target_tokenizer

CANNOT_CARRY = "a key size d_k other than d_model / n_heads (its fused attention projections split evenly)"


def export_ctranslate2(bundle: Any, out: str | Path, sentences: list[str] | None = None) -> Path:
    """Write bundle as a CTranslate2 model folder at out (a new folder), after checking that it translates
    a few sentences (sentences, or check_sentences's) exactly as ours with beam 4."""
    import ctranslate2  # optional: the "export" extra

    check = check_sentences(bundle, sentences)

    def verify(folder: Path) -> str | None:
        translator = ctranslate2.Translator(str(folder), device="cpu", compute_type="float32", intra_threads=1)
        theirs = translate_tokens(translator, bundle, check, DecodeOptions(**CHECK_OPTIONS))
        return mismatch(check, our_outputs(bundle, check), theirs, "CTranslate2")

    return write_checked(out, lambda folder: write_model(bundle, folder), verify)


def write_model(bundle: Any, folder: Path) -> None:
    """The CTranslate2 model of bundle, with its vocabularies, into the existing folder (unchecked)."""
    spec = transformer_spec(bundle.model)
    spec.register_source_vocabulary(vocabulary(bundle.tokenizer))
    spec.register_target_vocabulary(vocabulary(target_tokenizer(bundle)))
    spec.validate()
    spec.optimize(quantization=None)  # fp32 weights; CTranslate2 quantizes when it loads (compute_type)
    spec.save(str(folder))


def transformer_spec(model: torch.nn.Module) -> Any:
    """The TransformerSpec holding model's weights (see the module's docstring for the mapping)."""
    from ctranslate2.specs import transformer_spec as ts

    c = model.config
    if c.key_size != c.d_head:
        raise ExportError(f"CTranslate2 cannot carry {CANNOT_CARRY}; this model has d_k {c.key_size}")
    encoder = ts.TransformerEncoderSpec(c.encoder_layers, c.n_heads, pre_norm=c.norm_first)
    decoder = ts.TransformerDecoderSpec(c.decoder_layers, c.n_heads, pre_norm=c.norm_first)
    positions = _array(model.positions.table)
    encoder.embeddings[0].weight = _array(model.src_embed.weight)
    decoder.embeddings.weight = _array(model.tgt_embed.weight)
    for side in (encoder, decoder):
        side.scale_embeddings = True
        side.position_encodings.encodings = positions
    if c.norm_first:
        _norm(encoder.layer_norm, model.encoder_norm)
        _norm(decoder.layer_norm, model.decoder_norm)
    for spec, layer in zip(encoder.layer, model.encoder_layers):
        _attention(spec.self_attention, layer.self_attn, layer.res_attn.norm)
        _ffn(spec.ffn, layer)
    for spec, layer in zip(decoder.layer, model.decoder_layers):
        _attention(spec.self_attention, layer.self_attn, layer.res_self.norm)
        _attention(spec.attention, layer.cross_attn, layer.res_cross.norm)
        _ffn(spec.ffn, layer)
    _linear(decoder.projection, model.generator)
    spec = ts.TransformerSpec(encoder, decoder)
    for name, value in (("layer_norm_epsilon", 1e-5), ("bos_token", "<bos>"), ("eos_token", "<eos>"),
                        ("unk_token", "<unk>"), ("decoder_start_token", "<bos>"), ("add_source_eos", True)):
        setattr(spec.config, name, value)
    return spec


def _array(tensor: torch.Tensor) -> Any:
    return tensor.detach().float().cpu().numpy().copy()


def _linear(spec: Any, linear: torch.nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _norm(spec: Any, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _attention(spec: Any, attention: torch.nn.Module, norm: torch.nn.LayerNorm) -> None:
    projections = ([attention.q_proj, attention.kv_proj] if attention.cross else [attention.qkv_proj])
    for linear_spec, linear in zip(spec.linear, projections + [attention.out_proj]):
        _linear(linear_spec, linear)
    _norm(spec.layer_norm, norm)


def _ffn(spec: Any, layer: torch.nn.Module) -> None:
    _linear(spec.linear_0, layer.ffn.w1)
    _linear(spec.linear_1, layer.ffn.w2)
    _norm(spec.layer_norm, layer.res_ffn.norm)


def translate_tokens(translator: Any, bundle: Any, sentences: list[str], options: DecodeOptions,
                     max_batch_size: int = 0) -> list[list[str]]:
    """A CTranslate2 translator's outputs for sentences as target token strings, read and limited as ours are
    (sources cut to max_len, output at most a·|source| + b tokens: CTranslate2 takes one limit for a call, the
    longest sentence's). Empty sentences give []."""
    max_len = bundle.model.config.max_len
    sources = [prepare_source(bundle.tokenizer, text, max_len).ids[:-1] for text in sentences]  # it adds eos
    limit = max(max_output_length(len(ids) + 1, options, max_len)[0] for ids in sources) if sources else 1
    kept = [i for i, ids in enumerate(sources) if ids]
    beam = options.beam_size if options.method == "beam" else 1
    results = translator.translate_batch(
        [bundle.tokenizer.tokens(sources[i]) for i in kept], beam_size=beam, length_penalty=options.alpha,
        max_decoding_length=limit, min_decoding_length=options.min_len, max_input_length=0,
        max_batch_size=max_batch_size) if kept else []
    outputs: list[list[str]] = [[] for _ in sentences]
    for i, result in zip(kept, results):
        outputs[i] = result.hypotheses[0]
    return outputs
