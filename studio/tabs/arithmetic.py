"""Attention arithmetic: one query's way through one head of a multi-head attention sub-layer, with
the model's own numbers (core.attention_arithmetic), step by step, each step labelled with its
equation of section 3.2: q = x·W^Q, the keys, q·k_j, ÷√d_k, the mask, the softmax, the weighted sum
of the values, the concatenation of the heads, W^O, the residual connection and LayerNorm.

The sentence pair is the session's current one (the last translation, or the What if tab's forced
target), read by the weights that made it: a model training live is explained as its snapshot was.
"""
from __future__ import annotations

import re
from functools import partial

import gradio as gr
import numpy as np

from core.explain.arithmetic import AttentionArithmetic
from core.explain.hooks import attention_maps
from core.inference.scoring import prepare_pair

from .. import plots
from ..components import Slider, refresh_on_screen
from ..numbers.explanations import Refused, arithmetic
from ..server.guard import guard
from ..server.limits import HEAVY
from ..server.registry import ModelRegistry
from ..shell import Current, Shell
from ..text import clip, md, md_table
from .attention import STACKS, picked_model_ranges
from .looked_at import NOTHING_YET, Looked, looked_at

TAB_ID = "arithmetic"
FIRST_STACK = "Cross-attention (decoder → encoder)"
INTRO = ("Section 3.2.1's scaled dot-product attention for **one query token** of the current sentence, with the "
         "model's own numbers: Attention(Q, K, V) = softmax(QKᵀ / √d<sub>k</sub>)·V, one head of section 3.2.2's "
         "MultiHead(Q, K, V) = Concat(head<sub>1</sub>, …, head<sub>h</sub>)·W<sup>O</sup>, then the residual "
         "connection and LayerNorm (3.1). Long vectors are heat strips (purple above 0, orange below; hover for "
         "each number); the per-key numbers are a table. A new page opens on the layer, head and query whose weights "
         "spread widest over real words (the highest entropy off <eos>), not on one that looks only at <eos>.")
TABLE_HEADERS = ["j", "key", "q·k_j", "÷√d_k", "mask", "softmax w_j"]  # short: the table fits a phone
TAG = re.compile(r"<2\w+>")  # a two-way model's language tag (core/data/directions.py): not a word


def query_tokens(looked: Looked, stack: str) -> list[str]:
    """The query positions of a stack: the source tokens with <eos> (encoder), or <bos> and the target's
    tokens (the decoder's input: decoder self- and cross-attention)."""
    pair = prepare_pair(looked.bundle, looked.source, looked.target)
    return pair.source_tokens if stack == "encoder" else looked.bundle.target_tokenizer.tokens(pair.tgt_in)


def query_picker(looked: Looked, stack: str, query: int | None) -> tuple[gr.Dropdown, int]:
    """A choice per query position (shown from 1, valued from 0), keeping query where it still exists (the
    decoder's positions say which token each predicts); and the query picked."""
    tokens = query_tokens(looked, stack)
    if stack == "encoder":
        labels = [f"{i + 1} · {plots.shown(t)}" for i, t in enumerate(tokens)]
    else:
        after = tokens[1:] + ["<eos>"]
        labels = [f"{i + 1} · {plots.shown(t)} (predicts {plots.shown(n)})"
                  for i, (t, n) in enumerate(zip(tokens, after))]
    default = min(1, len(tokens) - 1)  # the first real token: <bos> or the source's first word
    value = query if isinstance(query, int) and 0 <= query < len(tokens) else default
    return gr.Dropdown(choices=list(zip(labels, range(len(tokens)))), value=value), value


def fitted(looked: Looked, stack: str, layer: float, head: float) -> tuple[int, int, gr.Slider, gr.Slider]:
    """The layer and head within the stack's depth and the model's heads, and the sliders' updates for them
    (maxima at least 2: Gradio refuses a maximum equal to the minimum)."""
    c = looked.bundle.model.config
    layers = c.encoder_layers if stack == "encoder" else c.decoder_layers
    layer, head = min(max(int(layer), 1), layers), min(max(int(head), 1), c.n_heads)
    return (layer, head, gr.Slider(maximum=max(layers, 2), value=layer),
            gr.Slider(maximum=max(c.n_heads, 2), value=head))


def teaching_view(looked: Looked, stack: str) -> tuple[int, int, int]:
    """The (layer, head, query) a first view opens on, counted from 1, 1 and 0: among every layer, head and query
    of the stack, the one whose weights spread widest over real words (the highest entropy of the weights on keys
    other than <eos>, <bos> and language tags, renormalised), among those giving real words at least half their
    weight. Layer 1, head 1's first query often sends 0.99 of its weight to <eos>: a poor first example
    (issue 51)."""
    pair = prepare_pair(looked.bundle, looked.source, looked.target)
    maps = attention_maps(looked.bundle.model, pair.src, pair.tgt_in)[stack].double().numpy()  # (L, h, q, k)
    keys = pair.source_tokens if stack == "cross" else query_tokens(looked, stack)
    real = np.array([not (token in ("<eos>", "<bos>") or TAG.fullmatch(token)) for token in keys])
    if not real.any():
        return 1, 1, min(1, maps.shape[2] - 1)
    mass = maps[..., real].sum(-1)  # (L, h, q)
    shares = maps[..., real] / np.maximum(mass[..., None], 1e-12)
    entropy = -(shares * np.log(np.maximum(shares, 1e-12))).sum(-1)
    entropy[mass < 0.5] = -1.0  # mostly on <eos> or a tag: not a view of words
    layer, head, query = np.unravel_index(int(np.argmax(entropy)), entropy.shape)
    return int(layer) + 1, int(head) + 1, int(query)


def steps_table(a: AttentionArithmetic) -> str:
    """Steps 3-6 as numbers, a row per key: q·k_j, ÷√d_k, the mask, the softmax."""
    rows = [[j + 1, plots.shown(token), f"{dot:.4f}", f"{scaled:.4f}", "0" if mask == 0 else "−∞", f"{w:.4f}"]
            for j, (token, dot, scaled, mask, w) in enumerate(zip(a.key_tokens, a.dots, a.scaled, a.mask, a.weights))]
    rows.append(["", "sum of the weights", "", "", "", f"{a.weights.sum():.4f}"])
    masked = " The decoder's mask (3.2.3) sets −∞ after the query: those weights are 0." if a.stack == "decoder" else ""
    caption = (f"Steps 3-6: q·k_j for every key j, divided by √d_k = √{a.q.shape[0]} = {a.scale:g}, plus the mask, "
               f"then softmax: the weights w_j.{masked}")
    return md_table(TABLE_HEADERS, rows, numeric=(0, 2, 3, 5), caption=caption)


def draw(looked: Looked | None, stack_label: str, layer: float, head: float, query: int | None) -> tuple:
    """(query and keys plot, steps table, weighted values plot, output plot, notices) for the picked head
    and query; one core call."""
    if looked is None:
        blank = plots.empty("Translate a sentence first.")
        return blank, "", blank, blank, ""
    stack = STACKS.get(stack_label, "cross")
    try:
        a = arithmetic(looked.bundle, looked.source, looked.target, stack, int(layer) - 1, int(head) - 1,
                       0 if query is None else query)
    except Refused as why:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), f"**Cannot compute:** {md(clip(why, 300))}"
    config = looked.bundle.model.config
    name = looked.model

    def title(step: str) -> str:
        return plots.arithmetic_title(name, stack_label.split(" (")[0], a, step)
    return (plots.query_and_keys(a, title("Steps 1-2: the query and the keys")), steps_table(a),
            plots.weighted_values(a, title("Step 7: the weighted sum of the values")),
            plots.concat_to_output(a, config.n_heads, config.norm_first, title("Steps 8-10: heads, W^O, residual, "
                                                                                "LayerNorm")),
            "\n".join(f"- {md(clip(n, 300))}" for n in a.notices))


def refresh(registry: ModelRegistry, current: Current | None, drawn: tuple | None, on_screen: str,
            picked: str | None, stack_label: str, layer: float, head: float, query: int | None,
            chosen: dict | None = None) -> tuple:
    """A sentence pair not shown yet, when this tab is on screen: (Looked, header, layer, head, query picker,
    the four views, notices, drawn). chosen: None, or {"query": a query counted from 0, or None} when a link or the
    visitor chose the layer, head or query before the first sentence."""
    key = (current, registry.key(picked))
    if on_screen != TAB_ID or key == drawn:
        return (gr.skip(),) * 11
    looked = looked_at(registry, current, picked)
    if isinstance(looked, str):
        blank = plots.empty("Translate a sentence first.")
        # drawn stays None: the first sentence drawn is still to come (it opens on the teaching view or a link's).
        none = gr.Dropdown(choices=[], value=None)
        return None, looked, gr.skip(), gr.skip(), none, blank, "", blank, blank, "", None
    stack = STACKS.get(stack_label, "cross")
    # This page's first sentence: open on a head and query worth teaching, unless a link or the visitor chose.
    if drawn is None and chosen is None:
        layer, head, query = teaching_view(looked, stack)
    else:  # a later sentence starts at its first real token
        query = chosen["query"] if drawn is None else None
    layer, head, layer_slider, head_slider = fitted(looked, stack, layer, head)
    picker, query = query_picker(looked, stack, query)
    views = draw(looked, stack_label, layer, head, query)
    return looked, looked.header(), layer_slider, head_slider, picker, *views, key


def restack(looked: Looked | None, stack_label: str, layer: float, head: float, query: int | None) -> tuple:
    """Another stack: its layers and query positions (the query kept where it exists), then draw()."""
    if looked is None:
        return gr.skip(), gr.skip(), gr.skip(), *draw(None, stack_label, layer, head, query)
    stack = STACKS.get(stack_label, "cross")
    layer, head, layer_slider, head_slider = fitted(looked, stack, layer, head)
    picker, query = query_picker(looked, stack, query)
    return layer_slider, head_slider, picker, *draw(looked, stack_label, layer, head, query)


def build(shell: Shell, current: gr.State, tab: gr.Tab, on_screen: gr.State
          ) -> tuple[gr.Radio, gr.Slider, gr.Slider, gr.Dropdown, gr.State]:
    """Returns the stack, layer, head and query controls and the choice refresh() keeps (a deep link sets them)."""
    looked, drawn, chosen = gr.State(None), gr.State(None), gr.State(None)
    header = gr.Markdown(NOTHING_YET)
    gr.Markdown(INTRO)
    with gr.Row():
        stack = gr.Radio(list(STACKS), value=FIRST_STACK, label="Attention", scale=3, min_width=300)
        query = gr.Dropdown(choices=[], value=None, label="Query token", scale=2, min_width=300,
                            elem_id="arithmetic-query")
    with gr.Row():
        layer = Slider(1, 6, value=1, step=1, label="layer")
        head = Slider(1, 8, value=1, step=1, label="head")
    notices = gr.Markdown(elem_classes="announce")
    first = gr.Plot(label="The query and the keys")
    table = gr.Markdown(elem_id="arithmetic-steps")
    second = gr.Plot(label="The weighted sum of the values")
    third = gr.Plot(label="Heads, W^O, residual and LayerNorm")
    views = [first, table, second, third, notices]
    update = dict(fn=guard(partial(refresh, shell.registry)),
                  inputs=[current, drawn, on_screen, shell.model, stack, layer, head, query, chosen],
                  outputs=[looked, header, layer, head, query, *views, drawn], api_visibility="private", **HEAVY)
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden", api_visibility="private").then(**update)
    gr.on([refresh_on_screen(current, "tab-arithmetic").click, shell.model_key.change], trigger_mode="always_last",
          **update)
    # Before any sentence, the sliders span the picked model's layers and heads (not 6 and 8).
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(picked_model_ranges, shell.registry)),
          inputs=[shell.model, layer, head], outputs=[layer, head], show_progress="hidden", api_visibility="private")
    stack.input(guard(restack), inputs=[looked, stack, layer, head, query], outputs=[layer, head, query, *views],
                api_name="arithmetic_stack", **HEAVY)
    gr.on([layer.input, head.input, query.input], guard(draw), inputs=[looked, stack, layer, head, query],
          outputs=views, trigger_mode="always_last", api_name="arithmetic_view", **HEAVY)
    # The visitor's layer or head, moved before the first sentence, is kept over the teaching view.
    gr.on([layer.input, head.input], lambda kept: kept or {"query": None}, inputs=chosen, outputs=chosen,
          show_progress="hidden", api_visibility="private")
    return stack, layer, head, query, chosen
