"""Saliency: which source tokens drove each target token, by gradients (core.attribution: gradient ×
input, or integrated gradients), beside where the cross-attention looked, how far the two agree, and
the word alignments read from the attention (fairseq's --print-alignment)."""
from __future__ import annotations

from functools import partial

import gradio as gr

from .. import plots
from ..components import Slider
from ..explain import METHOD_NAMES, Refused, Saliency, saliency
from ..limits import HEAVY, MAX_IG_STEPS
from ..registry import ModelRegistry
from ..shell import Current, Shell
from ..text import clip, guard, md
from .looked_at import NOTHING_YET, Looked, looked_at

TAB_ID = "saliency"
METHODS = {name: method for method, name in METHOD_NAMES.items()}  # the radio's label -> core's name
DEBATE = ("*Is attention an explanation?* Jain & Wallace (2019, “Attention is not Explanation”) found attention "
          "weights often disagree with gradient-based importance, and that other weights can give the same "
          "prediction; Wiegreffe & Pinter (2019, “Attention is not not Explanation”) answered that it depends on "
          "what one claims and how it is tested. Here both are side by side, on the same axes: judge for yourself.")
HOW = ("Attribution: each target token's log-probability (teacher forced) traced back to the source token "
       "embeddings, signed (purple: the source token raised it; orange: lowered it), each row's absolute values "
       "summing to 1. Gradient × input takes one gradient; integrated gradients average gradients along the way "
       "from all-zero embeddings (more steps: closer to the integral, slower). Agreement: Spearman's ρ between "
       "|attribution| and the attention, per target token (1: same ranking of the source tokens).")


def agreement_line(s: Saliency) -> str:
    """The agreement in one number and what it means."""
    mean = s.mean_agreement
    if mean != mean:  # NaN: every row constant
        return "**Agreement:** none to measure (every row is constant)."
    word = "agree" if mean >= 0.5 else "partly agree" if mean >= 0.2 else "hardly agree"
    return (f"**Agreement: mean Spearman ρ = {mean:.2f}** over {int((s.agreement == s.agreement).sum())} target "
            f"tokens: the gradients and the attention {word} on which source tokens matter (per token: the bars "
            f"below).")


def alignments(s: Saliency) -> str:
    """The alignments as "source token → target token" lines."""
    if not s.alignment:
        return ""
    lines = [f"- {md(plots.shown(s.source_tokens[i]))} → {md(plots.shown(s.target_tokens[j]))}"
             for i, j in s.alignment]
    return ("**Word alignments** read from the last decoder layer's cross-attention (mean of its heads; each target "
            "token to the source token it attends to most, as fairseq's `--print-alignment`):\n\n" + "\n".join(lines))


def draw(looked: Looked | None, method_label: str, steps: float) -> tuple:
    """(maps plot, agreement line, agreement bars, alignments, notices): one core.attribution call."""
    if looked is None:
        blank = plots.empty("Translate a sentence first.")
        return blank, "", blank, "", ""
    method = METHODS.get(method_label, method_label)
    try:
        s = saliency(looked.bundle, looked.source, looked.target, method, steps)
    except Refused as why:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), f"**Cannot compute:** {md(clip(why, 300))}"
    name = METHOD_NAMES[s.method] + (f", {s.steps} steps" if s.method == "integrated_gradients" else "")
    model = plots.label(looked.model)
    maps = plots.saliency_maps(s.attribution, s.attention, s.source_tokens, s.target_tokens, name,
                               f"{model} · which source tokens drove each target token")
    bars = plots.agreement_bars(s.agreement, s.target_tokens, s.mean_agreement,
                                f"{model} · agreement of |attribution| and attention, per target token")
    return maps, agreement_line(s), bars, alignments(s), "\n".join(f"- {md(clip(n, 300))}" for n in s.notices)


def refresh(registry: ModelRegistry, current: Current | None, drawn: tuple | None, on_screen: str,
            picked: str | None, method_label: str, steps: float) -> tuple:
    """A sentence pair not shown yet, when this tab is on screen: (Looked, header, the views, drawn)."""
    key = (current, registry.key(picked))
    if on_screen != TAB_ID or key == drawn:
        return (gr.skip(),) * 8
    looked = looked_at(registry, current, picked)
    if isinstance(looked, str):
        return None, looked, *draw(None, method_label, steps), key
    return looked, looked.header(), *draw(looked, method_label, steps), key


def build(shell: Shell, current: gr.State, tab: gr.Tab, on_screen: gr.State) -> None:
    looked, drawn = gr.State(None), gr.State(None)
    header = gr.Markdown(NOTHING_YET)
    gr.Markdown(DEBATE)
    with gr.Row():
        method = gr.Radio(list(METHODS), value=next(iter(METHODS)), label="Attribution method", scale=2)
        steps = Slider(1, MAX_IG_STEPS, value=32, step=1, label="integration steps", visible=False, scale=2)
    notices = gr.Markdown(elem_classes="announce")
    maps = gr.Plot(label="Attribution and cross-attention")
    agreement = gr.Markdown(elem_id="saliency-agreement")
    bars = gr.Plot(label="Agreement per target token")
    aligned = gr.Markdown(elem_id="saliency-alignments")
    gr.Markdown(HOW)
    views = [maps, agreement, bars, aligned, notices]
    update = dict(fn=guard(partial(refresh, shell.registry)),
                  inputs=[current, drawn, on_screen, shell.model, method, steps],
                  outputs=[looked, header, *views, drawn], api_visibility="private", **HEAVY)
    tab.select(lambda: TAB_ID, outputs=on_screen, show_progress="hidden", api_visibility="private").then(**update)
    gr.on([current.change, shell.model_key.change], **update)
    method.change(lambda label: gr.Slider(visible=METHODS.get(label) == "integrated_gradients"), inputs=method,
                  outputs=steps, show_progress="hidden", api_visibility="private")
    gr.on([method.input, steps.input], guard(draw), inputs=[looked, method, steps], outputs=views,
          trigger_mode="always_last", api_name="saliency_view", **HEAVY)
