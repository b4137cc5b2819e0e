"""The Model tab's numbers and figures of a bundle: where its parameters are, the learning-rate schedule it trained
with (5.3, eq. 3), the label-smoothed target (5.4) and the masks of an example batch (3.1, 3.2.3). No Gradio here: a
notebook draws the same figures (studio/notebook/model_parts.py)."""
from __future__ import annotations

from dataclasses import fields

import numpy as np
import plotly.graph_objects as go
import torch

from core.bundle import ModelBundle
from core.data.batching import pad_ids, source_ids
from core.data.tokenizer import PAD_ID
from core.inference.translation import Translation, translate_detailed
from core.training.loss import smoothed_target_distribution
from core.training.schedule import learning_rate
from core.training.train_config import TrainConfig

from .. import plots
from ..server.registry import examples_for
from ..text import md

# What the curve shows for a model whose checkpoint records no training settings: the paper's.
PAPER_SCHEDULE = TrainConfig(max_steps=100000, warmup=4000, lr_factor=1.0, schedule="noam", label_smoothing=0.1)


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def parameter_rows(bundle: ModelBundle) -> list[tuple[str, int, str]]:
    """(component, parameters, note) for every part of the model; sums to num_parameters()."""
    m, c = bundle.model, bundle.model.config
    rows = [("Embeddings (source = target = generator)" if c.shared_vocab else "Source embeddings",
             _count(m.src_embed), f"{c.src_vocab_size} × {c.d_model}, scaled by √d_model (3.4)")]
    if not c.shared_vocab:
        rows.append(("Target embeddings (= generator)", _count(m.tgt_embed), f"{c.tgt_vocab_size} × {c.d_model}"))
    rows.append(("Positional encoding", 0, "sinusoids, no parameters (3.5)"))
    projections = f"W^Q,K,V,O: 4 × {c.d_model}²" + (" + biases" if c.attention_bias else "")  # 3.2.2: no biases
    for i, layer in enumerate(m.encoder_layers, 1):
        rows += [(f"Encoder {i} · self-attention", _count(layer.self_attn), projections),
                 (f"Encoder {i} · feed-forward", _count(layer.ffn), f"{c.d_model} → {c.d_ff} → {c.d_model}"),
                 (f"Encoder {i} · 2 LayerNorms", _count(layer.res_attn) + _count(layer.res_ffn), "gain and bias")]
    for i, layer in enumerate(m.decoder_layers, 1):
        rows += [(f"Decoder {i} · masked self-attention", _count(layer.self_attn), "causal (3.2.3)"),
                 (f"Decoder {i} · cross-attention", _count(layer.cross_attn), "queries from the decoder, keys/values "
                                                                               "from the encoder"),
                 (f"Decoder {i} · feed-forward", _count(layer.ffn), f"{c.d_model} → {c.d_ff} → {c.d_model}"),
                 (f"Decoder {i} · 3 LayerNorms", _count(layer.res_self) + _count(layer.res_cross)
                  + _count(layer.res_ffn), "gain and bias")]
    rows.append(("Final LayerNorms (pre-norm only)", _count(m.encoder_norm) + _count(m.decoder_norm),
                 "pre-norm" if c.norm_first else "post-norm: none"))
    rows.append(("Generator (pre-softmax linear)", 0, "tied to the target embeddings (3.4)"))
    return rows


def parameter_groups(bundle: ModelBundle) -> dict[str, int]:
    """parameter_rows() summed over the layers by kind: "Encoder self-attention", "Embeddings", ..."""
    groups: dict[str, int] = {}
    for name, n, _ in parameter_rows(bundle):
        stack, _, part = name.partition(" · ")  # "Encoder 2 · feed-forward"
        if "LayerNorm" in name:
            kind = "LayerNorms"
        elif part:
            kind = f"{stack.split()[0]} {part}"
        else:
            kind = "Embeddings"
        if n:
            groups[kind] = groups.get(kind, 0) + n
    return groups


def summary(bundle: ModelBundle) -> tuple[str, str]:
    """(one line: the architecture and its parameter count, the table of parameters per component)."""
    c, total = bundle.model.config, bundle.model.num_parameters()
    line = (f"**{md(bundle.name)}**: {c.encoder_layers} encoder + {c.decoder_layers} decoder layers, "
            f"d_model {c.d_model}, {c.n_heads} heads of {c.d_head}, d_ff {c.d_ff}, dropout {c.dropout}, "
            f"{'pre' if c.norm_first else 'post'}-norm, max {c.max_len} tokens: "
            f"**{total:,} parameters**.")
    table = ["| Component | Parameters | Shape / note |", "|---|---:|---|"]
    table += [f"| {name} | {n:,} | {note} |" for name, n, note in parameter_rows(bundle)]
    table.append(f"| **Total** | **{total:,}** | tied weights counted once |")
    return line, "\n".join(table)


def training_config(bundle: ModelBundle) -> TrainConfig | None:
    """The settings the model trains (the Train tab's live run) or trained with (config.json's
    "train"); None when there is no usable record (e.g. an uploaded checkpoint without one)."""
    record = bundle.info.get("train")
    if not isinstance(record, dict):
        return None
    try:  # TrainConfig checks every type and range: a hand-edited record cannot break the plot
        return TrainConfig(**{f.name: record[f.name] for f in fields(TrainConfig) if f.name in record})
    except (TypeError, ValueError):
        return None


def schedule_line(bundle: ModelBundle) -> str:
    """The schedule the curve shows, in words: the model's own, or the paper's where it has no record."""
    c = training_config(bundle)
    if c is None:
        return (f"**{md(bundle.name)}** records no training settings: the curve shows the paper's schedule "
                f"(eq. 3, lr factor 1, warm-up {PAPER_SCHEDULE.warmup}).")
    peak = learning_rate(c.warmup, schedule=c.schedule, d_model=bundle.model.config.d_model, warmup=c.warmup,
                         factor=c.lr_factor, peak_lr=c.peak_lr)
    kind = (f"eq. 3 × lr factor {c.lr_factor:g}" if c.schedule == "noam" else
            "fairseq's inverse square root (linear warm-up to the peak, then peak · √(warmup / step))")
    return (f"**{md(bundle.name)}** trains with {kind}, warm-up {c.warmup:,} steps, {c.max_steps:,} steps: peak "
            f"learning rate {peak:.2e} at step {c.warmup:,}. Move warmup_steps to compare others.")


def lr_figure(bundle: ModelBundle, warmup: float, steps: float) -> go.Figure:
    """The model's learning-rate schedule (kind, lr factor or peak: its own) with warmup_steps from the slider."""
    c, d_model = training_config(bundle) or PAPER_SCHEDULE, bundle.model.config.d_model
    warmup, steps = max(1, int(warmup)), max(2, int(steps))
    # A warm-up past the steps shown would leave the peak off the curve: draw on to 1.5 × warm-up, and say so.
    beyond = warmup > steps
    if beyond:
        steps = warmup * 3 // 2
    x = np.unique(np.append(np.linspace(1, steps, 400).astype(int), warmup))  # the peak drawn too

    def rates(warmup: int) -> np.ndarray:
        return np.array([learning_rate(int(s), schedule=c.schedule, d_model=d_model, warmup=warmup,
                                       factor=c.lr_factor, peak_lr=c.peak_lr) for s in x])

    title = (f"lr = {c.lr_factor:g} · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), d_model = {d_model}"
             if c.schedule == "noam" else f"lr = {c.peak_lr:g} · min(step / warmup, √(warmup / step))")
    # Moved off the model's own warm-up, the curve is compared with the one it trains with.
    own = None if c.warmup == warmup else (rates(c.warmup), f"{'the paper' if c is PAPER_SCHEDULE else 'its own'}: "
                                                            f"warmup_steps = {c.warmup}")
    return plots.lr_schedule(x, rates(warmup), warmup, title, beyond, own)


def example_sentences(bundle: ModelBundle) -> list[str]:
    """The model's examples, or two stand-ins for a model without any."""
    return examples_for(bundle) or ["ein Beispiel .", "noch ein etwas längeres Beispiel ."]


def example_translation(bundle: ModelBundle, sentences: list[str]) -> Translation:
    """The first example's greedy translation, 10 tokens at most: the target side both figures show."""
    return translate_detailed(bundle, sentences[:1], method="greedy", max_len_a=0.0, max_len_b=11)[0]


def smoothing_figure(bundle: ModelBundle, eps: float, target_ids: list[int]) -> go.Figure:
    """The smoothed target for one reference token (a target-language one: the first of the example's
    translation, <eos> when that is empty), on 12 vocabulary entries around it."""
    vocab = bundle.model.config.tgt_vocab_size
    target = target_ids[0] if target_ids else bundle.model.config.eos_id
    lo = max(0, min(target - 5, vocab - 12))
    ids = list(range(lo, min(vocab, lo + 12)))
    dist = smoothed_target_distribution(target, vocab, float(eps)).numpy()
    return plots.label_smoothing(dist[ids], bundle.target_tokenizer.tokens(ids), ids.index(target), float(eps))


def mask_figure(bundle: ModelBundle, sentences: list[str], first: Translation) -> go.Figure:
    """Padding masks of up to three example sentences; the causal mask of the first one's translation."""
    rows = [source_ids(bundle.tokenizer, s)[: bundle.model.config.max_len] for s in sentences[:3]]
    ids = pad_ids(rows).numpy()
    tokens = [bundle.tokenizer.tokens(r) for r in rows]
    return plots.masks(tokens, ids == PAD_ID, ["<bos>"] + first.tokens)
