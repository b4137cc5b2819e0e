"""Our Transformer (sections 3.1-3.5) as a Hugging Face transformers MarianMT model: the closest architecture
there (post-norm, embeddings scaled by sqrt(d_model), sinusoidal positions, ReLU FFN), with our tokenizer as a
PreTrainedTokenizerFast, so that ``AutoModelForSeq2SeqLM.from_pretrained(folder).generate`` (and transformers 4's
``pipeline("translation", folder)``) run it.

Two differences are bridged exactly:
- positions (3.5): ours interleave sin and cos (columns 2i, 2i+1), Marian puts every sin first and every cos
  in the second half, and computes them again on load. So every d_model-wide coordinate is permuted alike
  (embeddings, LayerNorms, the projections' d_model sides): column 2i goes to i, 2i+1 to d/2 + i. LayerNorm,
  attention and the FFN do not care about the order of coordinates, so the model computes the same function;
- biases: Marian's W^Q, W^K, W^V, W^O have them; a model without (the paper's 3.2.2) gets zeros.
One difference stays: our tokenizer spells out "<eos>" typed in a sentence, the exported one (tokenizers does
not save that setting) reads it as the control token.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..export import CHECK_OPTIONS, ExportError, check_sentences, mismatch, our_outputs, write_checked
from ..inference.options import DecodeOptions
from ..inference.translation import max_output_length, prepare_source

CANNOT_CARRY = ("learned positions (Marian computes sinusoids on load), pre-norm (norm_first), separate source "
                "and target vocabularies (one tokenizer), or d_k other than d_model / n_heads")


def export_marian(bundle: Any, out: str | Path, sentences: list[str] | None = None) -> Path:
    """Write bundle as a transformers MarianMT folder (config.json, model.safetensors, generation_config.json and
    the tokenizer files) at out, a new folder, after checking that its greedy and beam-4 translations of a few
    sentences (sentences, or check_sentences's) are ours."""
    check_carried(bundle.model.config)
    check = check_sentences(bundle, sentences)

    def write(folder: Path) -> None:
        model = marian_model(bundle.model)
        model.save_pretrained(str(folder))
        hf_tokenizer(bundle).save_pretrained(str(folder))

    def verify(folder: Path) -> str | None:
        from transformers import AutoTokenizer, MarianMTModel

        model, tokenizer = MarianMTModel.from_pretrained(str(folder)).eval(), AutoTokenizer.from_pretrained(str(folder))
        for method in ("greedy", "beam"):
            theirs = generate_tokens(model, tokenizer, bundle, check, DecodeOptions(**{**CHECK_OPTIONS,
                                                                                     "method": method}))
            problem = mismatch(check, our_outputs(bundle, check, method=method), theirs, f"transformers ({method})")
            if problem:
                return problem
        return None

    return write_checked(out, write, verify)


def check_carried(c: Any) -> None:
    problems = [what for what, bad in (("learned positions", c.positional != "sinusoidal"),
                                       ("pre-norm (norm_first)", c.norm_first),
                                       ("separate vocabularies", not c.shared_vocab),
                                       (f"d_k {c.key_size}", c.key_size != c.d_head)) if bad]
    if problems:
        raise ExportError(f"MarianMT cannot carry this model's {', '.join(problems)}; it cannot carry {CANNOT_CARRY}")


def marian_model(model: torch.nn.Module) -> Any:
    """A MarianMTModel computing model's function (see the module's docstring)."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    c = model.config
    config = MarianConfig(
        vocab_size=c.tgt_vocab_size, d_model=c.d_model, encoder_layers=c.encoder_layers,
        decoder_layers=c.decoder_layers, encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff, max_position_embeddings=c.max_len,
        activation_function="relu", scale_embedding=True, dropout=c.dropout, attention_dropout=c.attention_dropout,
        pad_token_id=c.pad_id, bos_token_id=c.bos_id, eos_token_id=c.eos_id, decoder_start_token_id=c.bos_id,
        forced_eos_token_id=c.eos_id, share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
    hf = MarianMTModel(config)
    missing, unexpected = hf.load_state_dict(marian_state(model), strict=False)
    left = [k for k in missing if "embed_positions" not in k and not k.endswith("embed_tokens.weight")
            and k not in ("lm_head.weight", "final_logits_bias")]
    if left or unexpected:  # a transformers release that renamed Marian's weights
        raise ExportError(f"this transformers' MarianMTModel has other weights: missing {left[:3]}, "
                          f"unexpected {unexpected[:3]}")
    hf.tie_weights()
    hf.generation_config = GenerationConfig(
        decoder_start_token_id=c.bos_id, bos_token_id=c.bos_id, eos_token_id=c.eos_id, pad_token_id=c.pad_id,
        forced_eos_token_id=c.eos_id, num_beams=4, length_penalty=0.6, early_stopping=True, max_length=c.max_len)
    return hf.eval()


def marian_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Marian's weight names -> our weights, d_model coordinates permuted to Marian's sin|cos layout."""
    d = model.config.d_model
    order = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # Marian column j <- ours order[j]
    state = {"model.shared.weight": model.src_embed.weight[:, order]}
    for i, layer in enumerate(model.encoder_layers):
        at = f"model.encoder.layers.{i}."
        state.update(_attention(at + "self_attn.", layer.self_attn, order))
        state.update(_norm(at + "self_attn_layer_norm.", layer.res_attn.norm, order))
        state.update(_ffn(at, layer, order))
    for i, layer in enumerate(model.decoder_layers):
        at = f"model.decoder.layers.{i}."
        state.update(_attention(at + "self_attn.", layer.self_attn, order))
        state.update(_norm(at + "self_attn_layer_norm.", layer.res_self.norm, order))
        state.update(_attention(at + "encoder_attn.", layer.cross_attn, order))
        state.update(_norm(at + "encoder_attn_layer_norm.", layer.res_cross.norm, order))
        state.update(_ffn(at, layer, order))
    return {name: tensor.detach().float().cpu().contiguous() for name, tensor in state.items()}


def _attention(at: str, attention: torch.nn.Module, order: torch.Tensor) -> dict[str, torch.Tensor]:
    if attention.cross:
        weights = [attention.q_proj.weight, *attention.kv_proj.weight.split(attention.widths[1:])]
        biases = [attention.q_proj.bias, *(attention.kv_proj.bias.split(attention.widths[1:])
                                           if attention.kv_proj.bias is not None else (None, None))]
    else:
        weights = list(attention.qkv_proj.weight.split(attention.widths))
        biases = (list(attention.qkv_proj.bias.split(attention.widths)) if attention.qkv_proj.bias is not None
                  else [None] * 3)
    state = {}
    for name, weight, bias in zip(("q_proj", "k_proj", "v_proj"), weights, biases):
        state[f"{at}{name}.weight"] = weight[:, order]  # reads the d_model-wide input
        state[f"{at}{name}.bias"] = bias if bias is not None else weight.new_zeros(weight.size(0))
    out = attention.out_proj
    state[f"{at}out_proj.weight"] = out.weight[order]  # writes the d_model-wide output
    state[f"{at}out_proj.bias"] = out.bias[order] if out.bias is not None else out.weight.new_zeros(out.weight.size(0))
    return state


def _norm(at: str, norm: torch.nn.LayerNorm, order: torch.Tensor) -> dict[str, torch.Tensor]:
    return {at + "weight": norm.weight[order], at + "bias": norm.bias[order]}


def _ffn(at: str, layer: torch.nn.Module, order: torch.Tensor) -> dict[str, torch.Tensor]:
    w1, w2 = layer.ffn.w1, layer.ffn.w2
    return {at + "fc1.weight": w1.weight[:, order], at + "fc1.bias": w1.bias,
            at + "fc2.weight": w2.weight[order], at + "fc2.bias": w2.bias[order],
            **_norm(at + "final_layer_norm.", layer.res_ffn.norm, order)}


def hf_tokenizer(bundle: Any) -> Any:
    """Our tokenizer as a PreTrainedTokenizerFast that appends <eos> to each source, as our encoder reads it."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    inner = HFTokenizer.from_str(bundle.tokenizer.to_json())
    inner.post_processor = TemplateProcessing(single="$A <eos>", pair="$A <eos> $B <eos>",
                                              special_tokens=[("<eos>", bundle.model.config.eos_id)])
    return PreTrainedTokenizerFast(tokenizer_object=inner, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                                   pad_token="<pad>", model_max_length=bundle.model.config.max_len)


def generate_tokens(model: Any, tokenizer: Any, bundle: Any, sentences: list[str],
                    options: DecodeOptions) -> list[list[str]]:
    """A transformers model's outputs for sentences, one at a time with its own length limit, as token strings."""
    outputs = []
    for text in sentences:
        source = prepare_source(bundle.tokenizer, text, bundle.model.config.max_len)
        limit, _ = max_output_length(len(source.ids), options, bundle.model.config.max_len)
        batch = tokenizer([text], return_tensors="pt")
        search = (dict(num_beams=options.beam_size, length_penalty=options.alpha, early_stopping=True)
                  if options.method == "beam" else dict(num_beams=1))
        with torch.inference_mode():  # max_length counts the decoder's start token
            ids = model.generate(**batch, **search, do_sample=False, max_length=limit + 1,
                                 min_new_tokens=options.min_len)[0]
        ids = [i for i in ids.tolist()[1:] if i != bundle.model.config.pad_id]
        outputs.append(tokenizer.convert_ids_to_tokens(ids[:-1] if ids and ids[-1] == bundle.model.config.eos_id
                                                       else ids))
    return outputs
