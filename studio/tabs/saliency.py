"""Saliency: which source tokens drove each target token, by gradients (core.attribution: gradient ×
input, or integrated gradients), beside where the cross-attention looked, how far the two agree, and
the word alignments read from the attention (fairseq's --print-alignment)."""
from __future__ import annotations

from functools import partial

import gradio as gr

from core.explain.saliency import MIN_RANKED

from .. import plots
from ..components import Slider, refresh_on_screen
from ..numbers.explanations import METHOD_NAMES, Refused, Saliency, saliency
from ..server.guard import guard
from ..server.limits import HEAVY, MAX_IG_STEPS
from ..server.registry import ModelRegistry
from ..shell import Current, Shell
from ..text import clip, md
from .looked_at import NOTHING_YET, Looked, looked_at

TAB_ID = "saliency"
METHODS = {name: method for method, name in METHOD_NAMES.items()}  # the radio's label -> core's name
DEBATE = ("*Is attention an explanation?* Jain & Wallace (2019, “Attention is not Explanation”) found attention "
          "weights often disagree with gradient-based importance, and that other weights can give the same "
          "prediction; Wiegreffe & Pinter (2019, “Attention is not not Explanation”) answered that it depends on "
          "what one claims and how it is tested. Here both are side by side, on the same axes: judge for yourself.")
HOW = ("Attribution: each target token's log-probability (teacher forced) traced back to the source token "
       "embeddings, signed (purple: the source token raised it; orange: lowered it), each row's absolute values "
       "summing to 1. Gradient × input takes one gradient, the slope where the token is: what a little *more* of it "
       "would do, which can be negative where the model is already sure (saturated) of a word that token gave it. "
       "Integrated gradients add the gradients up along the way from all-zero embeddings to the token (more steps: "
       "closer to the integral, slower), so their sign says what the token did as a whole. The two can thus colour "
       "one cell purple and orange; the agreement compares sizes, |attribution|, not signs.\n\n"
       "**Agreement**, per target token (`<eos>` aside): is the source token of largest |attribution| the one the "
       "cross-attention weighs most? Source `<eos>` and language tags are left out. A yes or no per target token "
       "holds even for a sentence of three words, and the count of yeses is the result. The bars show the "
       "attention on the most-attributed source token (its label on the bar) as a share of the attention on the "
       "source's words, and a tick at the most-attended token's share: where they agree the bar reaches the tick. "
       f"Spearman's ρ of the whole ranking is given only from {MIN_RANKED} source tokens up: on fewer, the order "
       "of the near-zero rest, noise, decides it.")


def agreement_line(s: Saliency) -> str:
    """The agreement as a count, in words: how many target tokens' most-attributed source token is their
    most-attended one, beside what chance would give; Spearman's ρ too for a sentence long enough."""
    c = s.compared
    if not c.compared:
        return "**Agreement:** nothing to compare (no target token but &lt;eos&gt;, or no source word)."
    words = f"{c.words} source token{'s' * (c.words != 1)}"
    line = (f"**Agreement: the most-attributed source token is the most-attended one for {c.agreed} of "
            f"{c.compared} target token{'s' * (c.compared != 1)}** (by chance: 1 in {c.words}; &lt;eos&gt; and "
            "language tags left out).")
    if c.mean_rho == c.mean_rho:
        line += (f" Over all {words}, Spearman's ρ of |attribution| and attention averages {c.mean_rho:.2f} "
                 "(1: the same ranking).")
    else:
        line += f" No rank correlation: {words} are too few for one to mean anything (it needs {MIN_RANKED})."
    return line


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
    bars = plots.agreement_bars(s.compared, s.source_tokens, s.target_tokens,
                                f"{model} · does the most-attributed source token get the most attention? "
                                f"{s.compared.agreed} of {s.compared.compared}")
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
    gr.on([refresh_on_screen(current, "tab-saliency").click, shell.model_key.change], trigger_mode="always_last",
          **update)
    method.change(lambda label: gr.Slider(visible=METHODS.get(label) == "integrated_gradients"), inputs=method,
                  outputs=steps, show_progress="hidden", api_visibility="private")
    gr.on([method.input, steps.input], guard(draw), inputs=[looked, method, steps], outputs=views,
          trigger_mode="always_last", api_name="saliency_view", **HEAVY)
