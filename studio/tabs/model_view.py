"""The model's parts: parameter counts, the paper's learning-rate schedule (5.3), the
label-smoothed target (5.4) and the masks of an example batch (3.2.3)."""
from __future__ import annotations

from functools import partial

import gradio as gr
import numpy as np
import torch

from core.batching import source_ids
from core.bundle import ModelBundle
from core.decoding import translate_detailed
from core.loss import smoothed_target_distribution
from core.schedule import noam_lr
from core.tokenizer import PAD_ID

from .. import plots
from ..app import Shell
from ..text import guard, md
from ..widgets import Slider
from .translate import examples_for

LR_CAPTION = ("**Section 5.3, eq. 3:** the learning rate rises linearly for the first warmup_steps, then "
              "falls with the inverse square root of the step. Its peak, d_model^-0.5 · warmup^-0.5, is "
              "smaller for wider models.")
SMOOTHING_CAPTION = ("**Section 5.4:** label smoothing (the paper: ε = 0.1; the slider sets ε) trains towards "
                     "1 − ε on the reference token and ε spread evenly over the whole vocabulary (shown on a "
                     "slice; note the log scale). "
                     "\"This hurts perplexity, as the model learns to be more unsure, but improves accuracy "
                     "and BLEU score.\"")
MASK_CAPTION = ("**Sections 3.1 and 3.2.3:** padding keys get zero attention weight, so sentences of different "
                "lengths share a batch; the decoder's self-attention is causal — position t sees keys ≤ t — so "
                "training on whole target sentences never lets a position look at the word it must predict.")


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
    for i, layer in enumerate(m.encoder_layers, 1):
        rows += [(f"Encoder {i} · self-attention", _count(layer.self_attn), f"W^Q,K,V,O: 4 × {c.d_model}² + biases"),
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


def _train_setting(bundle: ModelBundle, key: str, default: float) -> float:
    train = bundle.info.get("train")
    return float(train.get(key, default)) if isinstance(train, dict) else default


def lr_figure(d_model: int, warmup: float, steps: float):
    warmup, steps = max(1, int(warmup)), max(2, int(steps))
    x = np.unique(np.linspace(1, steps, 400).astype(int))
    return plots.lr_schedule(x, np.array([noam_lr(int(s), d_model, warmup) for s in x]), warmup, d_model)


def smoothing_figure(bundle: ModelBundle, eps: float):
    """The smoothed target for one reference token, on 12 vocabulary entries around it."""
    vocab = bundle.model.config.tgt_vocab_size
    example = (examples_for(bundle) or ["."])[0]
    target = next(iter(bundle.tokenizer.encode(example)), 4)
    lo = max(0, min(target - 5, vocab - 12))
    ids = list(range(lo, min(vocab, lo + 12)))
    dist = smoothed_target_distribution(target, vocab, float(eps)).numpy()
    return plots.label_smoothing(dist[ids], bundle.tokenizer.tokens(ids), ids.index(target), float(eps))


def mask_figure(bundle: ModelBundle):
    """Padding masks of up to three example sentences; the causal mask of the first one's translation."""
    sentences = (examples_for(bundle) or ["ein Beispiel .", "noch ein etwas längeres Beispiel ."])[:3]
    rows = [source_ids(bundle.tokenizer, s)[: bundle.model.config.max_len] for s in sentences]
    width = max(map(len, rows))
    ids = np.array([r + [PAD_ID] * (width - len(r)) for r in rows])
    tokens = [bundle.tokenizer.tokens(r) for r in rows]
    first = translate_detailed(bundle, sentences[:1], method="greedy", max_len_a=0.0, max_len_b=11)[0]
    tgt = ["<bos>"] + first.tokens
    return plots.masks(tokens, ids == PAD_ID, tgt)


def render(registry, name: str | None, warmup: float, steps: float, eps: float):
    """(summary line, parameter table, lr plot, smoothing plot, mask plot) for the picked model."""
    try:
        bundle = registry.get(name)
    except (LookupError, ValueError, FileNotFoundError) as exc:
        blank = plots.empty("no model")
        return f"No model to show: {md(exc)}", "", blank, blank, blank
    return (*summary(bundle), lr_figure(bundle.model.config.d_model, warmup, steps),
            smoothing_figure(bundle, eps), mask_figure(bundle))


def defaults(registry, name: str | None):
    """Warm-up and ε the picked model was trained with (the paper's 4000 and 0.1 otherwise)."""
    try:
        bundle = registry.get(name)
    except (LookupError, ValueError, FileNotFoundError):
        return 4000, 0.1
    return int(_train_setting(bundle, "warmup", 4000)), _train_setting(bundle, "label_smoothing", 0.1)


def build(shell: Shell) -> None:
    summary_md = gr.Markdown()
    # Folded: its 20-odd rows would push the interactive plots a screen and more down.
    with gr.Accordion("Parameters per component", open=False):
        table_md = gr.Markdown()
    with gr.Row():
        warmup = Slider(100, 16000, value=4000, step=100, label="warmup_steps")
        steps = Slider(1000, 100000, value=30000, step=1000, label="steps shown")
        eps = Slider(0.0, 0.5, value=0.1, step=0.01, label="label smoothing ε")
    lr_plot = gr.Plot(label="Learning-rate schedule")
    gr.Markdown(LR_CAPTION)
    smoothing_plot = gr.Plot(label="Label-smoothed target")
    gr.Markdown(SMOOTHING_CAPTION)
    mask_plot = gr.Plot(label="Masks")
    gr.Markdown(MASK_CAPTION)
    outputs = [summary_md, table_md, lr_plot, smoothing_plot, mask_plot]
    draw = guard(partial(render, shell.registry))
    # On load too: the picked model's own warm-up and smoothing, not the paper's (e.g. 800, not 4000).
    gr.on([shell.demo.load, shell.model.change], guard(partial(defaults, shell.registry)), inputs=shell.model,
          outputs=[warmup, eps]).then(draw, inputs=[shell.model, warmup, steps, eps], outputs=outputs)
    gr.on([warmup.input, steps.input, eps.input], draw, inputs=[shell.model, warmup, steps, eps],
          outputs=outputs, trigger_mode="always_last")
