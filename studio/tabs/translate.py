"""Translate: a sentence in, its translation, each token's probability and the n-best list out."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

import gradio as gr
from gradio.components.plot import PlotData

from core.bundle import ModelBundle
from core.inference.options import DTYPES, SAMPLE_TEMPERATURE, SAMPLE_TOP_P, DecodeOptions
from core.inference.precision import DESCRIPTIONS, supported_dtypes
from core.inference.translation import Translation
from core.model.config import INT64_MAX
from core.training.loss import smoothed_target_distribution

from .. import plots
from ..components import Slider, TypedSlider, script
from ..server import batching
from ..server.guard import NotServed, guard
from ..server.limits import BATCHED, BEAM_RANGE, DEFAULT_BEAM, clamp_beam, clean_input
from ..server.registry import UNAVAILABLE, ModelRegistry
from ..shell import Current, Shell, picked_examples, switched
from ..text import clip, md, md_table

# Below this confidence (Translation.confidence) a beam or greedy translation comes with a notice that
# the model is unsure. Measured on the shipped Multi30k De→En model with beam 4: 96% of test_2016's German
# sentences score above 0.4, and 96% of their English references, given to it as the source, below 0.36 (it
# "translates" English into fluent nonsense); greedy leaves 10% of the German below 0.4. Everyday German unlike
# its image captions (Tatoeba) mostly scores below 0.4 too. Sampling is left out: a sampled word is often an
# unlikely one.
LOW_CONFIDENCE = 0.4
SPOKEN_JS = script("spoken_translation.js")


def options(method: str, beam_size: float, alpha: float, max_extra: float, n_best: float,
            temperature: float, top_k: float, top_p: float, seed: str | int | None = None,
            precision: str | None = "fp32") -> DecodeOptions:
    """DecodeOptions from the controls; ValueError names a bad option (checked here, as they are made)."""
    beam = method == "beam"
    return DecodeOptions(method=method, beam_size=int(beam_size) if beam else 1, alpha=float(alpha),
                         max_len_b=int(max_extra), n_best=min(int(n_best), int(beam_size)) if beam else 1,
                         temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                         seed=parse_seed(seed) if method == "sample" else None,  # a hidden box holds nothing up
                         dtype=precision or "fp32")  # an API call that leaves it out gets the exact path


def parse_seed(seed: str | int | None) -> int | None:
    """The seed box: empty for a fresh random seed each time, else a whole number from 0 to 2**63 - 1
    (torch's generator takes 64 bits at most)."""
    text = str(seed).strip() if seed is not None else ""
    if not text:
        return None
    if not text.isdecimal():  # also refuses "-1", "1.5", "1e3"
        raise ValueError(f"the seed must be a whole number from 0 to {INT64_MAX:,} (or empty for a random "
                         f"one); got {text[:40]!r}")
    if len(text) > len(str(INT64_MAX)) or int(text) > INT64_MAX:  # the length check first: no huge int()
        raise ValueError(f"the seed must be at most {INT64_MAX:,}; got {text[:40]}")
    return int(text)


def seed_or_random(seed: str | int | None) -> tuple[int | None, str | None]:
    """parse_seed's seed, or None (a random one) and what was wrong with the one typed (-1, "abc", 1e30)."""
    try:
        return parse_seed(seed), None
    except ValueError as exc:
        return None, f"{exc}: sampled with a random seed instead"


def unsure(t: Translation, bundle: ModelBundle) -> list[str]:
    """A notice when the model was unsure of its translation: the usual cause is a source in another
    language, or unlike anything in the training data."""
    if not t.confidence < LOW_CONFIDENCE:  # NaN (nothing decoded) is not unsure
        return []
    src = bundle.info.get("src_lang")
    language = f"in its source language ({src})" if src else "in its source language"
    return [f"The model is unsure of this translation: its tokens' probabilities average {t.confidence:.0%} "
            f"(geometric mean). Is the sentence {language}, and like the sentences it learnt from?"]


NBEST_CAPTION = ("n-best list — score: beam, log-probability ÷ ((5 + length) / 6)^α; greedy and sample, "
                 "log-probability (the sum over the tokens)")


EMPTY_HYPOTHESIS = "(empty: <eos> came first)"  # a wide beam can keep one; a blank cell read as a fault


def nbest_rows(t: Translation) -> list[list]:
    return [[i + 1, f"{score:.4f}", text or EMPTY_HYPOTHESIS] for i, (text, score) in enumerate(t.n_best)]


def nbest_table(t: Translation) -> str:
    """The n-best list as a captioned Markdown table ("" when there is none)."""
    rows = nbest_rows(t)
    return md_table(["rank", "score", "translation"], rows, numeric=(0, 1), caption=NBEST_CAPTION) if rows else ""


def translate(registry: ModelRegistry, name: str | None, text: str, method: str, beam_size: float, alpha: float,
              max_extra: float, n_best: float, temperature: float, top_k: float, top_p: float,
              seed: str | int | None, precision: str | None = "fp32") -> tuple:
    """(translation, probability plot, n-best table, notice Markdown, Current) — never raises."""
    # Every message goes to the notice list under the translation, no toast: one repeating it covered
    # the controls on the right, for 5-10 s, on a projector.
    text, cleaned = clean_input(text)
    if not text or not text.strip():
        return ("", plots.empty("no translation yet"), "",
                "*Nothing to translate: type a sentence (or click an example).*", Current())
    if method == "beam":  # a beam size typed out of range, or not a number, is said on the notes line
        beam_size, clamped = clamp_beam(beam_size)
        cleaned = cleaned + ([clamped] if clamped else [])
    if method == "sample":  # so is a seed that is not one: the sample is drawn, with a random seed
        seed, unseeded = seed_or_random(seed)
        cleaned = cleaned + ([unseeded] if unseeded else [])
    try:
        key, bundle = registry.key(name), registry.get(name)
        opts = options(method, beam_size, alpha, max_extra, n_best, temperature, top_k, top_p, seed, precision)
    except UNAVAILABLE as exc:
        return cannot_translate(exc)
    try:  # decoded with the requests that arrive meanwhile for this model and these settings
        t = batching.translate(bundle, text, opts, key)
    except (ValueError, NotServed) as exc:  # an option the model cannot take (a beam as wide as a tiny vocabulary),
        return cannot_translate(exc)  # more than a request may cost, or turned away or stopped by the decoding slots
    if method != "sample":
        cleaned = cleaned + unsure(t, bundle)
    if opts.dtype != "fp32":  # the studio says which arithmetic gave this translation
        cleaned = cleaned + [f"decoded in {opts.dtype} ({DESCRIPTIONS[opts.dtype]}): faster, nearly always fp32's "
                             f"translation"]
    if method == "beam" and int(n_best) > opts.n_best:
        cleaned = cleaned + [f"n-best shown: {opts.n_best}, the beam size (a beam search keeps no more than "
                             f"{opts.beam_size} hypotheses); {int(n_best)} asked"]
    notices = [clip(n, 300) for n in cleaned + t.notices]  # e.g. a 2,000-character unknown piece
    notes = "\n".join(f"- {md(n)}" for n in notices)
    tokens = t.tokens + ["<eos>"] if t.token_logprobs else []
    probabilities = PlotData(type="plotly",  # the figure's JSON as gr.Plot sends it
                             plot=plots.token_probabilities_json(tokens, t.token_logprobs, smoothing_ceiling(bundle)))
    return (t.text, probabilities, nbest_table(t), notes,
            Current(name, text, list(t.ids), opts, key, bundle))


def smoothing_ceiling(bundle: ModelBundle) -> float | None:
    """The probability label smoothing (5.4) trained the model to give the right word, 1 - eps + eps/V;
    None when its training record names no smoothing."""
    train = bundle.info.get("train")
    eps = train.get("label_smoothing") if isinstance(train, dict) else None
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        return None
    return _smoothed_target(bundle.target_tokenizer.vocab_size, float(eps))


@lru_cache(maxsize=64)
def _smoothed_target(vocab_size: int, eps: float) -> float:
    """Cached: the distribution is a vocabulary-long tensor, built for every translation before."""
    return float(smoothed_target_distribution(0, vocab_size, eps).max())


def cannot_translate(exc: Exception) -> tuple:
    """translate()'s outputs when it cannot: the reason on the notes line, the rest blank. The blank plot
    is built only then: ~7 ms, a sixth of a translate request's CPU."""
    return "", plots.empty("no translation yet"), "", f"**Cannot translate:** {md(exc)}", Current()


def redecode(registry: ModelRegistry, current: Current, name: str | None, text: str, method: str, *rest) -> tuple:
    """The decoding method switched while a translation is shown: translate again, as Translate would, so
    the translation, its probabilities and its n-best list are the picked method's (a beam search's n-best
    list stayed under a greedy pick otherwise)."""
    if current is None or current.options is None or current.options.method == method or not (text or "").strip():
        return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return translate(registry, name, text, method, *rest)


def model_changed(registry: ModelRegistry, name: str | None, current: Current) -> tuple:
    """Another model picked (or a new run under the picked name): the translation on screen is not its
    own, so it goes, with a note; the source stays in its box for Translate. A translation made with the
    picked model already (Translate pressed before its key reached the page) stays."""
    if current is None or not switched(registry, current, name):
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    key = registry.key(name)
    new_run = key is not None and key[0] == current.model
    what = "A new training run took this model's name" if new_run else "Another model is picked"
    return "", plots.empty("no translation yet"), "", f"*{what}: press Translate for its translation.*"


def trained_task(registry: ModelRegistry, name: str | None) -> str:
    """The synthetic task the picked model learnt ('' for others): it reads only that task's input
    form ("forty - two", not "forty two"), which its examples alone do not say."""
    try:
        data = registry.get(name).info.get("data")
    except UNAVAILABLE:
        return ""
    return str(data.get("task", "")) if isinstance(data, dict) else ""


def examples_update(registry: ModelRegistry, name: str | None) -> gr.Dataset:
    samples = picked_examples(registry, name)
    task = trained_task(registry, name)
    label = f"Examples (click one) · its task: {task}" if task else "Examples (click one)"
    return gr.Dataset(samples=[[s] for s in samples] or [[""]], visible=bool(samples), label=label)


def method_visibility(method: str) -> tuple[gr.Group, gr.Group]:
    """Beam controls for beam search, sampling controls for sampling."""
    return gr.Group(visible=method == "beam"), gr.Group(visible=method == "sample")


@dataclass
class TranslateTab:
    """What other parts of the page use: the session's Current translation (the Attention tab and the rest read
    it), and the source box with the translate event's arguments (a deep link fills and runs them)."""
    current: gr.State
    source: gr.Textbox
    method: gr.Radio
    inputs: list
    outputs: list


def build(shell: Shell) -> TranslateTab:
    """Lays out the tab; returns the session's Current translation and the source box (TranslateTab)."""
    current = gr.State(Current())
    with gr.Row():
        with gr.Column(scale=3):
            # One line to start (Enter translates; Gradio's multi-line boxes take Enter as a new line),
            # growing to 6 so a long paste does not push the translation off the screen.
            source = gr.Textbox(label="Source sentence", lines=1, max_lines=6,
                                placeholder="Type a sentence and press Enter, or click an example")
            go = gr.Button("Translate", variant="primary")
            # The result right under the button: on a projector (presenter mode, large type) the
            # audience sees it without scrolling.
            output = gr.Textbox(label="Translation", lines=2, interactive=False, buttons=["copy"],
                                elem_classes="readout")
            # A screen reader reads the translation out when it arrives (a box's new value is not).
            spoken = gr.Markdown(elem_classes=["announce", "visually-hidden"])
            notices = gr.Markdown(elem_classes="announce")
            examples = gr.Dataset(components=[source], samples=[[""]], label="Examples (click one)",
                                  samples_per_page=8, elem_id="translate-examples")
        with gr.Column(scale=2):
            method = gr.Radio(["beam", "greedy", "sample"], value="beam", label="Decoding")
            with gr.Group() as beam_group:
                beam_size = TypedSlider(*BEAM_RANGE, value=DEFAULT_BEAM, step=1, label="beam size")
                alpha = Slider(0.0, 2.0, value=0.6, step=0.05, label="length penalty α")
                n_best = Slider(1, 16, value=4, step=1, label="n-best shown")
            with gr.Group(visible=False) as sample_group:
                # Sampling starts where it reads as language (core/inference/options.py); sliders reach T = 1, top-p 1.
                temperature = Slider(0.05, 3.0, value=SAMPLE_TEMPERATURE, step=0.05, label="temperature")
                top_k = Slider(0, 100, value=0, step=1, label="top-k (0: off)")
                top_p = Slider(0.05, 1.0, value=SAMPLE_TOP_P, step=0.05, label="top-p (1: off)")
                # A Textbox: a Number box shows 0 when empty, and 0 would fix every sample.
                seed = gr.Textbox(value="", label="seed (empty: random)", placeholder="random", max_lines=1)
            max_extra = Slider(0, 200, value=50, step=1, label="max length: source length + N tokens")
            fast = supported_dtypes("cpu")[1:]
            precision = gr.Radio(list(DTYPES), value="fp32", label="precision",
                                 info=f"fp32 is exact; faster on this machine's CPU: {', '.join(fast) or 'none'}")
    probs = gr.Plot(label="Per-token probability")
    nbest = gr.Markdown(elem_id="translate-nbest")
    inputs = [shell.model, source, method, beam_size, alpha, max_extra, n_best, temperature, top_k, top_p, seed,
              precision]
    outputs = [output, probs, nbest, notices, current]
    run = guard(partial(translate, shell.registry))
    gr.on([go.click, source.submit, seed.submit], run, inputs=inputs, outputs=outputs, api_name="translate",
          **BATCHED)
    examples.click(lambda sample: sample[0], inputs=examples, outputs=source).then(run, inputs=inputs, outputs=outputs,
                                                                                   **BATCHED)
    output.change(None, inputs=output, outputs=spoken, js=SPOKEN_JS, show_progress="hidden")
    method.change(method_visibility, inputs=method, outputs=[beam_group, sample_group])
    method.input(guard(partial(redecode, shell.registry)), inputs=[current] + inputs, outputs=outputs, **BATCHED)
    gr.on([shell.demo.load, shell.model_key.change], guard(partial(examples_update, shell.registry)),
          inputs=shell.model, outputs=examples)
    shell.model_key.change(guard(partial(model_changed, shell.registry)), inputs=[shell.model, current],
                           outputs=outputs[:4], show_progress="hidden")
    return TranslateTab(current, source, method, inputs, outputs)
