"""Attention: every layer's and head's weights for the current sentence and translation
(plotly grid, one head large, bertviz), and head ablation: switch heads off, translate again."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import torch

from core.bundle import ModelBundle
from core.data.tokenizer import BOS_ID, EOS_ID
from core.explain.hooks import attention_maps
from core.explain.knockout import knocked_out
from core.inference.options import DecodeOptions
from core.inference.translation import prepare_source, translate_detailed
from core.model.config import ModelConfig

from .. import plots
from ..components import Slider, refresh_on_screen
from ..plots import bertviz_offline
from ..server import recent_results, slots
from ..server.guard import guard
from ..server.limits import HEAVY, clean_input
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Current, Shell, switched
from ..text import clip, md, word_diff

STACKS = {"Encoder self-attention": "encoder", "Decoder self-attention": "decoder",
          "Cross-attention (decoder → encoder)": "cross"}
FIRST_STACK = "Cross-attention (decoder → encoder)"  # a translation's story: what each output word reads
NO_BERTVIZ = "<p><em>No attention to show: translate a sentence with the picked model first.</em></p>"
AXES = {"encoder": ("query: source token", "key: source token"),
        "decoder": ("query: decoder input", "key: decoder input"),
        "cross": ("query: target token<br>being predicted", "key: source token")}
ABLATION_STACKS = ("encoder", "decoder", "cross")


@dataclass
class Analysis:
    """One sentence pair with every attention map, teacher-forced through the model."""

    model: str
    source: str
    translation: str
    src_tokens: list[str]  # encoder input: tokens + <eos>
    dec_tokens: list[str]  # decoder input: <bos> + output tokens
    out_tokens: list[str]  # what each decoder position predicts: output tokens + <eos>
    maps: dict[str, np.ndarray]  # stack -> (layers, heads, queries, keys)
    notices: list[str]  # what was done to the source on its way in (truncated, <unk>)
    forced: bool = False  # the target is one the What if tab forced, not the model's translation

    def axes(self, stack: str) -> tuple[list[str], list[str]]:
        return {"encoder": (self.src_tokens, self.src_tokens), "decoder": (self.dec_tokens, self.dec_tokens),
                "cross": (self.out_tokens, self.src_tokens)}[stack]


def analyse(bundle: ModelBundle, name: str, source: str, ids: list[int]) -> Analysis | None:
    """Feed source and its translation ids (no bos/eos) through the model with attention kept;
    None when the source has no tokens."""
    bundle = bundle.toward(None)  # a model serving both directions reads its source with a language tag
    max_len = bundle.model.config.max_len
    prepared = prepare_source(bundle.tokenizer, source, max_len, bundle.info)
    src = prepared.ids
    if not src:
        return None
    tgt_in = ([BOS_ID] + list(ids))[:max_len]
    maps = {k: v.numpy() for k, v in attention_maps(bundle.model, src, tgt_in).items()}  # (L, h, q, k)
    tok = bundle.target_tokenizer.tokens  # the decoder's side; the source's tokens are the source tokenizer's
    return Analysis(name, source, bundle.target_tokenizer.decode(ids), bundle.tokenizer.tokens(src), tok(tgt_in),
                    tok(tgt_in[1:] + [EOS_ID]),
                    maps, prepared.notices)


def figures(analysis: Analysis | None, stack_label: str, average: bool, layer: float, head: float
            ) -> tuple[go.Figure, go.Figure]:
    """(grid of every layer × head, one head large) for the chosen stack."""
    if analysis is None:
        blank = plots.empty("Translate a sentence first (Translate tab or the box above).")
        return blank, blank
    stack = STACKS[stack_label]
    model = plots.label(analysis.model)  # named on every map: which model they come from
    maps = analysis.maps[stack]
    rows, cols = analysis.axes(stack)
    n_layers, n_heads = maps.shape[:2]
    li = min(max(int(layer), 1), n_layers) - 1
    h = min(max(int(head), 1), n_heads) - 1
    if average:
        grid = plots.attention_grid(maps.mean(axis=1, keepdims=True), rows, cols,
                                    f"{model} · {stack_label}<br>mean over heads, per layer", ["mean of heads"],
                                    *AXES[stack])
        big, which = maps[li].mean(axis=0), f"layer {li + 1}, mean of {n_heads} heads"
    else:
        # Two lines: one would run past a 1280-pixel projector's edge in presenter mode's larger type.
        grid = plots.attention_grid(maps, rows, cols, f"{model} · {stack_label}<br>every layer (rows) × head (columns)",
                                    [f"H{i + 1}" for i in range(n_heads)], *AXES[stack])
        big, which = maps[li, h], f"layer {li + 1}, head {h + 1}"
    return grid, plots.attention_head(big, rows, cols, f"{model} · {stack_label}, {which}", *AXES[stack])


def bertviz_views(analysis: Analysis | None, stack_label: str = FIRST_STACK) -> tuple[str, str]:
    """bertviz head view and model view (HTML iframes) of all three stacks, open on the tab's stack."""
    if analysis is None:
        return (NO_BERTVIZ,) * 2
    attention = {k: [torch.from_numpy(m[None]) for m in v] for k, v in analysis.maps.items()}
    source, target = ([plots.shown(t) for t in tokens] for tokens in (analysis.src_tokens, analysis.dec_tokens))
    stack = STACKS[stack_label]
    return (bertviz_offline.head_view(attention, source, target, stack),
            bertviz_offline.model_view(attention, source, target, stack))


def header(analysis: Analysis | None) -> str:
    if analysis is None:
        return "*No sentence yet: translate one on the Translate tab, or type one here.*"
    notes = "".join(f"  \n*{md(clip(n, 300))}*" for n in analysis.notices)  # the maps show what the model read
    target = "Target (forced on the What if tab)" if analysis.forced else "Translation"
    return (f"**Model:** {md(analysis.model)}  \n**Source:** {md(analysis.source)}{notes}  \n"
            f"**{target}:** {md(analysis.translation)}")


def translated_with(current: Current, picked: str | None) -> str:
    """The model current was translated with, in words."""
    return f"an earlier run of {current.model}" if current.model == picked else str(current.model)


def stale(picked: str | None, current: Current) -> str:
    """The header once the picked model is not the one the sentence was translated with."""
    return (f"*Model changed to **{md(picked)}** (the last sentence was translated with "
            f"{md(translated_with(current, picked))}): translate again, on the Translate tab or in this tab's "
            f"sentence box.*")


# Analyses of the sentence pairs looked at lately, shared by every session (each session's State holds a
# reference): 11 MB of maps were kept per session, computed again for every student on the same example. At most
# ANALYSES_MB of them (a 256-token pair of the shipped model holds 9.4 MB of maps), kept after their sessions go.
ANALYSES_MB = 32
ANALYSES = recent_results.Recent(32, ANALYSES_MB * 2**20,
                          lambda analysis: sum(m.nbytes for m in analysis.maps.values()) if analysis else 0)


def show(registry: ModelRegistry, current: Current) -> tuple:
    """Translate tab's result -> (Analysis, header, slider updates)."""
    if current is None or not current.source or current.model is None:
        return None, header(None), gr.Slider(), gr.Slider()
    try:
        bundle = current.bundle or registry.get(current.model)
    except UNAVAILABLE as exc:
        return None, f"**Cannot analyse:** {md(exc)}", gr.Slider(), gr.Slider()
    ids = list(current.target_ids)
    analysis = ANALYSES.get((id(bundle), current.model, current.source, tuple(ids)), bundle,
                            partial(analyse, bundle, current.model, current.source, ids))
    if analysis is None:
        return None, header(None), gr.Slider(), gr.Slider()
    analysis = replace(analysis, forced=current.forced is not None)  # the maps stay shared
    return (analysis, header(analysis), *slider_ranges(bundle.model.config))


def slider_ranges(c: ModelConfig, layer: float | None = None, head: float | None = None
                  ) -> tuple[gr.Slider, gr.Slider]:
    """The layer and head sliders' maxima for a model. Both start at 1 and Gradio refuses
    maximum == minimum (a 1-layer or 1-head model): at least 2; figures() clamps to the model's.
    A layer or head beyond the new maximum comes down to it: the box shows what is drawn."""
    def fit(maximum: int, value: float | None) -> gr.Slider:
        if value is not None and value > maximum:
            return gr.Slider(maximum=maximum, value=maximum)
        return gr.Slider(maximum=maximum)
    return fit(max(c.encoder_layers, c.decoder_layers, 2), layer), fit(max(c.n_heads, 2), head)


def picked_model_ranges(registry: ModelRegistry, name: str | None, layer: float | None = None,
                        head: float | None = None) -> tuple:
    """Slider maxima of the picked model before any sentence is analysed (not 6 layers, 8 heads)."""
    try:
        return slider_ranges(registry.get(name).model.config, layer, head)
    except UNAVAILABLE:
        return gr.skip(), gr.skip()


# ----- drawing only what is on screen -------------------------------------------------------
# Every translation on the Translate tab updates the session's Current. Analysing it (a forward
# pass with every attention map kept), drawing the grid and writing bertviz's HTML waits until
# this tab is on screen: work nobody looks at would hold a decoding slot the next translation
# needs, and a plot drawn in a hidden tab comes out squeezed to half its width.
TAB_ID = "attention"


def refresh(registry: ModelRegistry, current: Current, drawn: tuple | None, on_screen: str, picked: str | None
            ) -> tuple:
    """show() for a Current (and picked model) not drawn yet, when this tab is on screen; otherwise
    nothing changes. A sentence translated with another model than the picked one is not drawn:
    its maps beside the picked model's sliders and ablation boxes would mix two models."""
    key = (current, registry.key(picked))
    if on_screen != TAB_ID or key == drawn:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    if current is not None and switched(registry, current, picked):
        return None, stale(picked, current), gr.skip(), gr.skip(), key
    with slots.heavy():
        return *show(registry, current), key


def redraw(analysis: Analysis | None, stack_label: str, average: bool, layer: float, head: float, on_screen: str
           ) -> tuple:
    """figures() when this tab is on screen."""
    if on_screen != TAB_ID:
        return gr.skip(), gr.skip()
    return figures(analysis, stack_label, average, layer, head)


def refresh_bertviz(analysis: Analysis | None, stack_label: str, rendered: tuple | None, on_screen: str,
                    unfolded: bool) -> tuple:
    """bertviz_views() for an analysis or stack whose views are not written yet, when on screen and
    unfolded (bertviz's page is half a megabyte a sentence, and most never open it); rendered names
    the sentence pair and stack the views show."""
    key = (analysis.model, analysis.source, analysis.translation, stack_label) if analysis else None
    if on_screen != TAB_ID or not unfolded or key == rendered:
        return gr.skip(), gr.skip(), gr.skip()
    return *bertviz_views(analysis, stack_label), key


def translate_here(registry: ModelRegistry, name: str | None, text: str) -> tuple:
    """The tab's own box: translate with the default settings (beam 4, α 0.6) -> (the new Current, what
    was done to the input). Nothing to translate keeps the maps on screen (gr.skip()) and says why, under
    the box: a toast covered the plots' placeholder."""
    text, cleaned = clean_input(text)
    if not text or not text.strip():
        return gr.skip(), "*Type a sentence to look at (or translate one on the Translate tab).*"
    try:
        key, bundle = registry.key(name), registry.get(name)
    except UNAVAILABLE as exc:
        return gr.skip(), f"**Cannot translate:** {md(exc)}"
    try:
        with slots.heavy():
            t = translate_detailed(bundle, [text], DecodeOptions())[0]
    except ValueError as exc:  # beam 4 on a model with fewer than 5 tokens
        return gr.skip(), f"**Cannot translate:** {md(exc)}"
    notes = "\n".join(f"- {md(clip(notice, 300))}" for notice in cleaned + t.notices)
    return Current(name, text, list(t.ids), DecodeOptions(), key, bundle), notes


# ----- head ablation ------------------------------------------------------------------------
# The CSS of each ablation group's class heads-N: its head count, and the largest divisor of it up to 3
# (a phone's row of boxes), for every head count a model here may have.
HEAD_COUNT_CSS = "".join(f".heads-{n} {{ --heads: {n}; --heads-narrow: {max(d for d in (1, 2, 3) if n % d == 0)}; }}"
                         "\n" for n in range(1, 65))


def head_choices(registry: ModelRegistry, name: str | None) -> tuple[gr.CheckboxGroup, ...]:
    """'L1 H3' boxes for every head of the picked model, one group per stack, none ticked; the class
    heads-N lays them out a layer a row (HEAD_COUNT_CSS, static/studio.css)."""
    try:
        c = registry.get(name).model.config
    except UNAVAILABLE:
        return tuple(gr.CheckboxGroup(choices=[], value=[]) for _ in ABLATION_STACKS)
    layers = {"encoder": c.encoder_layers, "decoder": c.decoder_layers, "cross": c.decoder_layers}
    return tuple(gr.CheckboxGroup(choices=[f"L{li + 1} H{h + 1}" for li in range(layers[s])
                                           for h in range(c.n_heads)],
                                  value=[], elem_classes=["ablation-heads", f"heads-{c.n_heads}"])
                 for s in ABLATION_STACKS)


def parse_heads(encoder: list[str], decoder: list[str], cross: list[str]) -> dict[str, dict[int, list[int]]]:
    """{"cross": ["L1 H3"]} style labels -> core.explain.knocked_out's heads, {"cross": {0: [2]}}, layers and heads in
    order (the boxes come in the order they were ticked)."""
    spec: dict[str, dict[int, list[int]]] = {}
    for stack, labels in zip(ABLATION_STACKS, (encoder, decoder, cross)):
        for li, h in sorted(tuple(int(part[1:]) - 1 for part in text.split()) for text in labels or []):
            spec.setdefault(stack, {}).setdefault(li, []).append(h)
    return spec


STACK_WORDS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}


def heads_named(spec: dict[str, dict[int, list[int]]], config: ModelConfig) -> str:
    """The heads switched off, in words: a whole stack or layer by that name, not head by head ("all 12
    cross-attention heads", not "L1 H1, L1 H2, ... L3 H4")."""
    parts = []
    for stack, layers in spec.items():
        n_layers = config.encoder_layers if stack == "encoder" else config.decoder_layers
        whole = {li for li, heads in layers.items() if len(heads) == config.n_heads}
        if len(whole) == n_layers:
            parts.append(f"all {n_layers * config.n_heads} {STACK_WORDS[stack]} heads")
            continue
        named = (f"L{li + 1} (all {config.n_heads} heads)" if li in whole
                 else ", ".join(f"L{li + 1} H{h + 1}" for h in hs) for li, hs in layers.items())
        parts.append(f"{STACK_WORDS[stack]} " + ", ".join(named))
    return "; ".join(parts)


def bold_changes(before: str, after: str) -> str:
    """after as Markdown, words that differ from before in bold (all text escaped)."""
    out = []
    for tag, _, words in word_diff(before, after):
        shown = " ".join(md(w) for w in words)
        out.append(shown if tag == "equal" or not shown else f"**{shown}**")
    return " ".join(w for w in out if w) or "*(empty)*"


def ablate(registry: ModelRegistry, current: Current, picked: str | None, encoder: list[str], decoder: list[str],
           cross: list[str]) -> str:
    """Translate the current source again with the ticked heads off (on a private copy of the model)."""
    if current is None or not current.source:
        return "*Translate a sentence first.*"
    if switched(registry, current, picked):  # the boxes name the picked model's heads, not the translating one's
        return stale(picked, current)
    spec = parse_heads(encoder, decoder, cross)
    if not spec:
        return "*Tick one or more heads to switch off.*"
    try:
        bundle = current.bundle or registry.get(current.model)
        model, lock = registry.ablation_model(current.model, bundle)
    except UNAVAILABLE as exc:
        return f"**Cannot ablate:** {md(exc)}"
    twin = replace(bundle, model=model)  # the same tokenizers (both, with separate vocabularies)
    with slots.heavy(), lock, knocked_out(model, heads=spec):  # the Knock out tab's heads (3.2.2)
        after = translate_detailed(twin, [current.source], current.options or DecodeOptions())[0].text
    before = bundle.target_tokenizer.decode(current.ids)
    off = heads_named(spec, model.config)
    verdict = "unchanged" if after == before else "changed (differences in bold)"
    return (f"**With {md(off)} off** the translation is {verdict}:  \n{bold_changes(before, after)}  \n"
            f"*All heads on:* {md(before)}")


def build(shell: Shell, current: gr.State, tab: gr.Tab, on_screen: gr.State) -> tuple[gr.Radio, gr.Slider, gr.Slider]:
    """current: the Translate tab's last translation; on_screen: the id of the tab on screen. Returns the stack,
    layer and head controls (a deep link sets them)."""
    analysis = gr.State(None)
    drawn = gr.State(None)  # (the Current, the picked model's registry key) that `analysis` was drawn for
    rendered = gr.State(None)  # the sentence pair and stack bertviz's views show
    title = gr.Markdown(header(None))
    with gr.Row():
        source = gr.Textbox(label="Or look at another sentence", scale=4)
        look = gr.Button("Show attention", scale=1)
    looked = gr.Markdown(elem_classes="announce")  # what was done to that sentence, or why nothing was
    with gr.Row():
        stack = gr.Radio(list(STACKS), value=FIRST_STACK, label="Attention", scale=3)
        average = gr.Checkbox(label="Average over heads", value=False, scale=1)
    grid = gr.Plot(label="Every layer and head")
    with gr.Row():
        layer = Slider(1, 6, value=1, step=1, label="layer (large view)")
        head = Slider(1, 8, value=1, step=1, label="head (large view)")
    big = gr.Plot(label="One head, large")
    bertviz_unfolded = gr.State(False)
    bertviz_panel, head_view, model_view = _bertviz_panel()
    groups, again, ablated = _ablation_panel()

    view_inputs = [analysis, stack, average, layer, head, on_screen]
    bertviz_inputs = [analysis, stack, rendered, on_screen, bertviz_unfolded]

    def draw(trigger: gr.events.Dependency) -> None:
        """After trigger: analyse, draw and write bertviz's views, as far as this tab is on screen."""
        trigger.then(guard(partial(refresh, shell.registry)), inputs=[current, drawn, on_screen, shell.model],
                     outputs=[analysis, title, layer, head, drawn], **HEAVY).then(
            guard(redraw), inputs=view_inputs, outputs=[grid, big]).then(
            guard(refresh_bertviz), inputs=bertviz_inputs, outputs=[head_view, model_view, rendered])

    draw(tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden"))
    # An old ablation is stale with a new sentence or model: cleared in the page, then redrawn if on screen.
    current.change(None, js="() => ''", outputs=ablated, show_progress="hidden")
    for change in (refresh_on_screen(current, "tab-attention").click, shell.model_key.change):
        draw(change(lambda: "", outputs=ablated, show_progress="hidden", trigger_mode="always_last"))
    gr.on([look.click, source.submit], guard(partial(translate_here, shell.registry)),
          inputs=[shell.model, source], outputs=[current, looked], **HEAVY)
    # Averaged over heads, the large view shows no one head: its slider rests.
    average.change(lambda averaged: gr.Slider(interactive=not averaged), inputs=average, outputs=head,
                   show_progress="hidden")
    gr.on([stack.change, average.change, layer.input, head.input], guard(redraw), inputs=view_inputs,
          outputs=[grid, big], trigger_mode="always_last")
    stack.change(guard(refresh_bertviz), inputs=bertviz_inputs, outputs=[head_view, model_view, rendered],
                 trigger_mode="always_last", show_progress="hidden")  # bertviz opens on the stack shown above
    bertviz_panel.expand(lambda: True, outputs=bertviz_unfolded, show_progress="hidden").then(
        guard(refresh_bertviz), inputs=bertviz_inputs, outputs=[head_view, model_view, rendered])
    bertviz_panel.collapse(lambda: False, outputs=bertviz_unfolded, show_progress="hidden")
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(head_choices, shell.registry)),
          inputs=shell.model, outputs=list(groups))
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(picked_model_ranges, shell.registry)),
          inputs=[shell.model, layer, head], outputs=[layer, head], show_progress="hidden")
    again.click(guard(partial(ablate, shell.registry)), inputs=[current, shell.model, *groups], outputs=ablated,
                **HEAVY)
    return stack, layer, head


def _bertviz_panel() -> tuple[gr.Accordion, gr.HTML, gr.HTML]:
    """bertviz's head view and model view, folded (written only once it is unfolded)."""
    with gr.Accordion("bertviz: head view and model view", open=False) as panel:
        gr.Markdown("bertviz counts layers and heads from 0: its layer 0, head 0 is this tab's layer 1, head 1. "
                    "In cross-attention it names each decoder row by the token that goes in (`<bos>`, A, …), "
                    "where this tab names it by the token the row predicts (A, …, `<eos>`): the same weights, "
                    "labelled one token apart.")
        with gr.Tabs():
            with gr.Tab("Head view"):
                head_view = gr.HTML(NO_BERTVIZ)
            with gr.Tab("Model view"):
                model_view = gr.HTML(NO_BERTVIZ)
    return panel, head_view, model_view


def _ablation_panel() -> tuple[tuple[gr.CheckboxGroup, ...], gr.Button, gr.Markdown]:
    """A group of head boxes per stack (head_choices() fills them), the button and its answer."""
    with gr.Accordion("Head ablation: switch heads off and translate again", open=True):
        with gr.Row():
            groups = tuple(gr.CheckboxGroup(label=label, choices=[], elem_classes="ablation-heads") for label in
                           ("Encoder self-attention heads off", "Decoder self-attention heads off",
                            "Cross-attention heads off"))
        again = gr.Button("Translate again with these heads off")
        ablated = gr.Markdown()
    return groups, again, ablated
