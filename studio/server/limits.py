"""What one visitor may ask of the studio: bounded text, bounded uploads, bounded concurrency.

The studio may run as a public Space on two CPU cores, so every input a visitor controls has a
ceiling that is enforced on the server (the browser's own checks can be bypassed through the API),
and a full queue answers "busy, try again" instead of piling work onto the machine. Each request's work is
estimated before it starts (``Budget``, the ``*_seconds`` estimates): one asking more than its budget is cut down
or refused, with a notice saying which and why (issue 55).
"""
from __future__ import annotations

import logging
import math
import os
import re
import weakref
from dataclasses import dataclass, replace
from typing import Any

from core.inference.translation import LONE_SURROGATE

from ..text import clip

MAX_INPUT_CHARS = 2_000  # per text box; the models read at most max_len (256) tokens anyway
MAX_NAME_CHARS = 64  # model names typed on the Train tab
MAX_UPLOAD_MB = 200  # per uploaded file, and per file unpacked from an uploaded .zip
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 2**20
# A .zip's checkpoint files together, unpacked: weights of at most MAX_UPLOAD_MB and room for the two JSON files.
MAX_UNPACKED_MB = MAX_UPLOAD_MB + 50
MAX_UPLOADED_MODELS = 4  # checkpoints opened from uploads kept in memory; the least recently used goes first
# Visitors' saves (VISITOR_SAVE) held loaded at once: any visitor's /score loads one, and each stayed loaded; beyond
# this the least recently used is unloaded (it loads again when next asked for).
MAX_LOADED_VISITOR_SAVES = 2
# Decoding callbacks (beam search, attention, saliency, compare, ablation) share this many slots
# (studio.server.slots.SLOTS): each runs on one torch thread, and more at once than cores only makes every request
# slower. Of the two, at most LONG_AT_ONCE run work estimated above SHORT_WORK_S: a short request never waits
# behind two long ones.
DECODE_CONCURRENCY = 2
LONG_AT_ONCE = 1
SHORT_WORK_S = 2.0
# Gradio lets this many of those events in at once (the rest wait in its queue, in order of arrival); inside,
# the slots go to the short requests first and, on a public studio, to one request per session at a time.
# More than SESSION_REQUESTS of one session at once are turned away: one visitor's queue cannot fill the room
# and make the next visitor wait behind it.
DECODE_ADMITTED = 16
SESSION_REQUESTS = 4
HEAVY = {"concurrency_limit": DECODE_ADMITTED, "concurrency_id": "decode"}
# Translate and /score requests are decoded in batches (studio.server.batching) of at most MAX_BATCH, in the same
# number of slots: Gradio lets enough of them in at once for the batches to fill.
MAX_BATCH = 16
BATCHED = {"concurrency_limit": 2 * MAX_BATCH, "concurrency_id": "batched"}
# Events waiting, all kinds together; beyond it a request is refused at once with Gradio's
# "This application is currently busy. Please try again." (QueueError in gradio_client).
QUEUE_SIZE = 64
# Integrated gradients' integration points (the Saliency tab's slider, /saliency): one forward pass of the pair
# per point and a backward pass per target token through all of them. 32 points take ~0.8 s on a 20-token pair
# (bench/explain.py), but ~400 s on a 256-token one: the request's Budget cuts the steps to what it affords.
MAX_IG_STEPS = 64
BEAM_RANGE = (1, 16)  # the Translate and Beam search tabs' beam sizes, /translate's and /beam_step's too
DEFAULT_BEAM = 4  # the paper's (section 6.1)
DEFAULT_CONCURRENCY = 2  # every other event (status lines, plots, the Train tab's timer)
# A public studio (`python -m studio --public`, a Space) has one training run for all its visitors:
# a run is bounded, and only the browser session that started it may pause, resume, stop or save it.
PUBLIC_MAX_PARAMETERS = 10_000_000  # the `small` preset (7.6M with an 8k vocabulary) fits
PUBLIC_MAX_MINUTES = 15.0  # from Start, pauses included
# Any studio refuses more than MAX_PARAMETERS in one line (16 GB of weights, gradients and Adam: a
# typo such as d_model 65536, not a lecture model; paper-big has 185M). Above CPU_NOTICE_PARAMETERS,
# about 2.5 times the `small` preset, a run on a CPU goes ahead but is announced as slow: every step
# takes seconds (a lecturer with a GPU may well want such a model).
MAX_PARAMETERS = 1_000_000_000
CPU_NOTICE_PARAMETERS = 20_000_000

# ----- what one request may cost ---------------------------------------------------------------------
# Work is estimated in CPU-seconds of one torch thread from the arithmetic it does: CPU_FLOPS_PER_S turns
# floating-point operations into seconds (bench/abuse.py measures it: 80-95 GFLOP/s for a pass of the shipped
# model, and for saliency's backward passes, on the development machine's cores). Each sentence of a corpus score
# adds Python's bookkeeping (batches, beams, BLEU), SENTENCE_OVERHEAD_S.
CPU_FLOPS_PER_S = 85e9
SENTENCE_OVERHEAD_S = 0.004
# One attention weight in /attention's JSON, "0.1234, " (rounded as a double: a float32 prints as 0.12340000271797180).
WEIGHT_JSON_BYTES = 8


@dataclass(frozen=True)
class Budget:
    """What one request may ask of the machine. Over cpu_s or memory_mb a request is cut down (fewer integration
    steps or corpus sentences) or refused; /attention leaves out maps beyond answer_mb; past deadline_s of work it is
    stopped. public: a public studio's, where a session's heavy requests take turns (studio.server.slots.Slots) and
    the limits cannot be raised."""

    cpu_s: float
    memory_mb: float
    answer_mb: float
    deadline_s: float | None
    public: bool

    @property
    def answer_weights(self) -> int:
        """How many attention weights an /attention answer may hold."""
        return int(self.answer_mb * 2**20 / WEIGHT_JSON_BYTES)


# A public studio's: 500 Multi30k sentences through two models with beam 4 (~16 s) fit; integrated gradients on a
# 256-token pair get 1-2 steps. A request works at most 40 s: with a short wait, its answer comes within a minute.
PUBLIC_BUDGET = Budget(cpu_s=20.0, memory_mb=512.0, answer_mb=5.0, deadline_s=40.0, public=True)
# Locally the same limits are defaults, which these environment variables raise (or lower); no deadline.
BUDGET_VARIABLES = {"STUDIO_REQUEST_CPU_S": "cpu_s", "STUDIO_REQUEST_MEMORY_MB": "memory_mb",
                    "STUDIO_ANSWER_MB": "answer_mb"}
_PUBLIC_APPS: weakref.WeakSet = weakref.WeakSet()


def local_budget(environ: dict[str, str] | None = None) -> Budget:
    """PUBLIC_BUDGET's limits, as BUDGET_VARIABLES raise them, with no deadline and no turns per session. A value
    that is not a positive number is ignored, with a warning in the log."""
    environ = os.environ if environ is None else environ
    changes: dict[str, Any] = {"deadline_s": None, "public": False}
    for variable, field in BUDGET_VARIABLES.items():
        text = environ.get(variable, "").strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            logging.getLogger("studio").warning("%s=%s is not a positive number; ignored", variable, text[:40])
            continue
        changes[field] = value
    return replace(PUBLIC_BUDGET, **changes)


def serve_publicly(app: Any) -> None:
    """Give app's requests PUBLIC_BUDGET (studio.api.register does it for a --public studio)."""
    _PUBLIC_APPS.add(app)


def budget_for(app: Any) -> Budget:
    """The budget of a request served by app (None: a call outside any app, e.g. from a script: the local one)."""
    return PUBLIC_BUDGET if app is not None and app in _PUBLIC_APPS else local_budget()


def forward_flops(config: Any, source_tokens: int, target_tokens: int) -> float:
    """Floating-point operations of one pass of a sentence pair through a model (a ModelConfig): each layer's
    weights once per position (3.2's projections, 3.3's feed-forward), the output projection once per target
    position, and attention's scores and weighted sums (eq. 1) once per pair of positions."""
    d, ff, s, t = config.d_model, config.d_ff, source_tokens, target_tokens
    encoder = config.encoder_layers * (4 * d * d + 2 * d * ff)
    decoder = config.decoder_layers * (8 * d * d + 2 * d * ff) + d * config.tgt_vocab_size
    attention = 2 * d * (config.encoder_layers * s * s + config.decoder_layers * (t * t + t * s))
    return 2.0 * (encoder * s + decoder * t + attention)


def saliency_seconds(config: Any, source_tokens: int, target_tokens: int, steps: int) -> float:
    """CPU-seconds of core.attribution: per integration point (1 for gradient × input) and per target token, a
    backward pass that costs about one forward pass of the pair (measured: bench/abuse.py)."""
    return steps * target_tokens * forward_flops(config, source_tokens, target_tokens) / CPU_FLOPS_PER_S


def saliency_megabytes(config: Any, source_tokens: int, target_tokens: int, steps: int) -> float:
    """Memory of integrated gradients' graph, kept for every integration point at once: per position and layer
    about 8·d_model + 2·d_ff numbers, and each head's scores over the pair (64 steps on a 256 + 256-token pair of
    the shipped model: 3.2 GB estimated, 2.7 GB measured)."""
    positions = source_tokens * config.encoder_layers + target_tokens * config.decoder_layers
    numbers = 8 * config.d_model + 2 * config.d_ff + 2 * config.n_heads * (source_tokens + target_tokens)
    return steps * positions * numbers * 4 / 2**20


def affordable_steps(budget: Budget, config: Any, source_tokens: int, target_tokens: int, steps: int) -> int:
    """The most integration steps, up to steps, whose time and memory fit budget (0: not even one)."""
    one_s = saliency_seconds(config, source_tokens, target_tokens, 1)
    one_mb = saliency_megabytes(config, source_tokens, target_tokens, 1)
    return max(0, min(steps, int(budget.cpu_s // one_s), int(budget.memory_mb // one_mb)))


def beam_search_megabytes(config: Any, beam: int, source_tokens: int, steps: int) -> float:
    """Memory a Beam search tab's search holds after steps steps: each step's decoder cache is kept for Back (every
    hypothesis' keys and values of its tokens so far in each decoder layer, float32) and each step's view, the
    cross-attention of its hypotheses. /beam_run of 2,000 characters with beam 16 held ~3.2 GB a session (issue 67);
    23 steps of beam 16 on a 256-token source of the shipped small model: 31.5 MB estimated, 33 MB measured."""
    kept = beam * 2 * config.d_model * config.decoder_layers * 4 * steps * (steps + 1) / 2
    views = steps * beam * config.decoder_layers * config.n_heads * source_tokens * 4
    return (kept + views) / 2**20


# A decoding step costs time beyond its arithmetic: each decoder layer's step ~1.5 ms for one hypothesis and ~0.07 ms
# more for each further row (a beam's hypotheses, a batch's sentences). Measured on tatoeba-en-es (4 decoder layers),
# 254 steps from a 256-token source, one thread beside a training run: greedy 6.3 ms a step, beam 4 8.1 ms, beam 16
# 14.4 ms (estimated 6.5, 8.1, 14.6 with the arithmetic).
DECODE_LAYER_STEP_S = 1.5e-3
DECODE_ROW_LAYER_STEP_S = 0.07e-3


def decoding_seconds(config: Any, source_tokens: int, steps: int, rows: int) -> float:
    """CPU-seconds of decoding rows hypotheses (sentences × beam) for steps steps from sources of source_tokens
    tokens: the arithmetic of a pass of each row, and each decoder layer's cost per step."""
    flops = rows * forward_flops(config, source_tokens, steps)
    per_step = config.decoder_layers * (DECODE_LAYER_STEP_S + rows * DECODE_ROW_LAYER_STEP_S)
    return flops / CPU_FLOPS_PER_S + steps * per_step


def budget_words(budget: Budget) -> str:
    """The budget in a notice: what a request here may take, and on a local studio how to raise it."""
    words = f"a request here may take ~{budget.cpu_s:g} CPU-seconds and {budget.memory_mb:g} MB"
    return words if budget.public else words + " (STUDIO_REQUEST_CPU_S and STUDIO_REQUEST_MEMORY_MB raise that)"


def number_words(value: float) -> str:
    """A number as a message may echo it: short (1e+300, not its 301 digits)."""
    try:
        return f"{value:.6g}"
    except OverflowError:  # an int beyond float's range
        return "a number of more than 300 digits"


def sentence_seconds(config: Any, source_tokens: int, target_tokens: int, beam: int) -> float:
    """CPU-seconds of one corpus sentence through one model: decoding (about a pass of the pair per hypothesis of
    the beam), teacher forcing the reference (one pass) and the bookkeeping around them."""
    flops = (beam + 1) * forward_flops(config, source_tokens, target_tokens)
    return flops / CPU_FLOPS_PER_S + SENTENCE_OVERHEAD_S


def affordable_sentences(budget: Budget, seconds: list[float]) -> int:
    """How many of the sentences, taken in order, fit budget (seconds: each one's estimate)."""
    spent = 0.0
    for count, cost in enumerate(seconds):
        spent += cost
        if spent > budget.cpu_s:
            return count
    return len(seconds)


# C0 and C1 control characters except tab, newline and carriage return. (Lone UTF-16 surrogates,
# LONE_SURROGATE, are replaced too: JSON can carry them, but UTF-8 and the Rust tokenizer cannot.)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


# Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE and its kin): in a model's name they reverse what the
# picker shows to every visitor, so names drop them.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Copies of uploads (studio-upload-*, studio-tsv-*) older than this at start are a crashed studio's, removed.
STALE_COPY_S = 3600


def clean_input(text: object, limit: int = MAX_INPUT_CHARS) -> tuple[str, list[str]]:
    """text cut to limit characters, lone surrogates replaced by U+FFFD and control characters by
    spaces; and a notice (in words) for each change made."""
    text = "" if text is None else str(text)
    notices = []
    if len(text) > limit:
        notices.append(f"input cut to its first {limit:,} characters (it had {len(text):,})")
        text = text[:limit]
    text, n = LONE_SURROGATE.subn("\ufffd", text)
    if n:
        notices.append(f"{n} invalid character{'s' * (n > 1)} (lone surrogate) replaced by \ufffd")
    text, n = _CONTROL.subn(" ", text)
    if n:
        notices.append(f"{n} control character{'s' * (n > 1)} replaced by spaces")
    return text, notices


def check_upload_size(size: int, what: str) -> None:
    """ValueError when an uploaded (or unpacked) file is larger than MAX_UPLOAD_BYTES."""
    if size > MAX_UPLOAD_BYTES:
        raise ValueError(f"{what} is {size / 2**20:,.0f} MB; the studio accepts files of at most "
                         f"{MAX_UPLOAD_MB} MB")


def check_unpacked_size(size: int) -> None:
    """ValueError when a .zip's checkpoint files come to more than MAX_UNPACKED_MB unpacked, all together."""
    if size > MAX_UNPACKED_MB * 2**20:
        raise ValueError(f"its checkpoint files come to {size / 2**20:,.0f} MB unpacked; the studio accepts at most "
                         f"{MAX_UNPACKED_MB} MB in all")


# ----- uploads: memory bounded before anything is parsed (issue 67) ------------------------------------------
# A checkpoint's config.json: the shipped ones are ~2 KB; a 200,000-deep one answered RecursionError.
MAX_CONFIG_BYTES = 64 * 2**10
# Nesting of an uploaded config.json or tokenizer.json: the shipped ones nest 3-4 deep; Python's parser recurses.
MAX_JSON_DEPTH = 32
# tokenizer.json: a 32k-entry BPE vocabulary is ~1.5 MB (the shipped 8k ones 0.56 MB); a 150 MB one with a
# 150-million-character added token took the server from 0.45 to 9 GB inside the tokenizers library.
MAX_TOKENIZER_MB = 16
# An uploaded tokenizer's entries (vocabulary and added tokens), and its longest entry in characters: BPE pieces
# and words are a few dozen characters; the model's embeddings cost d_model numbers per entry.
MAX_VOCABULARY = 64_000
MAX_TOKEN_CHARS = 256

# An uploaded TSV for a public studio's training run, checked while it is copied (before core reads it whole, and
# before BPE learns from it): a 158 MB TSV of 10 million lines took 9 GB and 220 CPU-s; one 100 MB line kept BPE
# training on both cores for over 10 minutes. A 15-minute run on 2 cores sees ~1M tokens (~70k pairs): 100,000
# pairs are more than it learns from (Multi30k has 29,000); a line longer than the models' max_len is left out.
# Measured (a `small` run's preparation, reading and BPE, beside a training run): 99,000 lines of 10 MB took
# 10.1 s and RSS 239 -> 849 MB; 199,000 lines of 20 MB 36.8 s and 239 -> 1,380 MB.
PUBLIC_MAX_CORPUS_LINES = 100_000
PUBLIC_MAX_CORPUS_MB = 10
PUBLIC_MAX_LINE_BYTES = 2_000

# What visitors of a public studio save into the checkpoints folder (each save is marked VISITOR_SAVE in its
# config.json; shipped checkpoints never are, and are never removed): 25 saves of one run took it from 77 to 627 MB
# and the picker to 35 entries. A run saves at most PUBLIC_SAVES_PER_RUN times; beyond PUBLIC_MAX_SAVES saves or
# PUBLIC_SAVES_MB in all, the oldest visitor saves are removed (a `small` model's save is ~90 MB with its Adam
# state: 4 of those fit).
PUBLIC_SAVES_PER_RUN = 3
PUBLIC_MAX_SAVES = 6
PUBLIC_SAVES_MB = 400
VISITOR_SAVE = "saved_by_a_visitor"

# ----- what a step costs: a cost model, not a parameter count (issue 67) -----------------------------------------
# A layer costs time whatever its width: one training step of 200 + 200 layers of d_model 2 took 1.28 s here
# (3.2 ms a layer, forward, backward and Adam; the arithmetic is nothing), so a 6,000-layer model of 0.3M
# parameters took 27 s a step. Each layer adds LAYER_STEP_S; the arithmetic adds its FLOPs at CPU_FLOPS_PER_S.
LAYER_STEP_S = 0.0032
COST_SENTENCE_TOKENS = 32  # a training pair's length in the estimate (Multi30k's sentences: 12-15 tokens)
# A public studio's training step, and an opened model's step on the tab's default batch (1,024 tokens), may
# cost at most this: the `small` preset's step is ~0.6 s estimated (0.76 s measured beside a training run).
PUBLIC_MAX_STEP_S = 3.0
COST_BATCH_TOKENS = 1024
# At most this many layers per stack on a public studio (the paper's models have 6).
PUBLIC_MAX_LAYERS = 12


def step_seconds(config: Any, tokens: int = COST_BATCH_TOKENS) -> float:
    """CPU-seconds of one training step of a batch of tokens target tokens (forward and about twice that backward)
    for a model of config: its arithmetic at CPU_FLOPS_PER_S and LAYER_STEP_S per layer. A decoding step of a
    batch that size costs less."""
    pairs = max(1.0, tokens / COST_SENTENCE_TOKENS)
    flops = 3 * pairs * forward_flops(config, COST_SENTENCE_TOKENS, COST_SENTENCE_TOKENS)
    return flops / CPU_FLOPS_PER_S + (config.encoder_layers + config.decoder_layers) * LAYER_STEP_S


def public_cost_refusal(config: Any, tokens: int = COST_BATCH_TOKENS) -> str | None:
    """Why a public studio does not take a model of config (a run of batches of tokens tokens, or an opened model):
    too many layers, or a step estimated above PUBLIC_MAX_STEP_S; None when it fits."""
    layers = max(config.encoder_layers, config.decoder_layers)
    if layers > PUBLIC_MAX_LAYERS:
        return (f"this public studio takes models of at most {PUBLIC_MAX_LAYERS} layers a stack, and this one has "
                f"{layers:,} (each layer costs ~{LAYER_STEP_S * 1e3:.1f} ms a step, however narrow)")
    seconds = step_seconds(config, tokens)
    if seconds > PUBLIC_MAX_STEP_S:
        return (f"one step of this model on {tokens:,} tokens would take ~{seconds:,.0f} CPU-seconds; this "
                f"public studio takes models whose step costs at most {PUBLIC_MAX_STEP_S:g} s (fewer layers, a "
                f"smaller d_model, d_ff, vocabulary or batch)")
    return None


def json_depth(text: str) -> int:
    """How deep text's JSON arrays and objects nest, counted without parsing (strings left out)."""
    depth = deepest = 0
    for bracket in re.findall(r"[\[\]{}]", re.sub(r'"(?:[^"\\]|\\.)*"', "", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def clamp_beam(beam_size: float | str | None) -> tuple[int, str | None]:
    """The beam size to use for the box's value, and what was changed and why (None: used as typed)."""
    lo, hi = BEAM_RANGE
    if beam_size is None or str(beam_size).strip() == "":
        return DEFAULT_BEAM, f"beam size was empty; using the default {DEFAULT_BEAM}"
    try:
        value = float(beam_size)
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value):
        return DEFAULT_BEAM, f"beam size {clip(beam_size, 20)!r} is not a number; using the default {DEFAULT_BEAM}"
    if value > hi:
        return hi, f"beam size {value:g} is above the maximum {hi}; using {hi}"
    if value < lo:
        return lo, f"beam size {value:g} is below the minimum {lo}; using {lo}"
    size = int(value)
    return size, None if size == value else f"beam size must be a whole number; {value:g} → {size}"
