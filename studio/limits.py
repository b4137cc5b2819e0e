"""What one visitor may ask of the studio: bounded text, bounded uploads, bounded concurrency.

The studio may run as a public Space on two CPU cores, so every input a visitor controls has a
ceiling that is enforced on the server (the browser's own checks can be bypassed through the API),
and a full queue answers "busy, try again" instead of piling work onto the machine.
"""
from __future__ import annotations

import math
import re

from core.inference.translation import LONE_SURROGATE

from .text import clip

MAX_INPUT_CHARS = 2_000  # per text box; the models read at most max_len (256) tokens anyway
MAX_NAME_CHARS = 64  # model names typed on the Train tab
MAX_UPLOAD_MB = 200  # per uploaded file, and per file unpacked from an uploaded .zip
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 2**20
# A .zip's checkpoint files together, unpacked: weights of at most MAX_UPLOAD_MB and room for the two JSON files.
MAX_UNPACKED_MB = MAX_UPLOAD_MB + 50
MAX_UPLOADED_MODELS = 4  # checkpoints opened from uploads kept in memory; the oldest goes first
# Decoding callbacks (translate, beam search, attention, ablation) share this many workers: each
# runs on one torch thread, and more at once than cores only makes every request slower.
DECODE_CONCURRENCY = 2
HEAVY = {"concurrency_limit": DECODE_CONCURRENCY, "concurrency_id": "decode"}
# Translate and /score requests are decoded in batches (studio.serving) of at most MAX_BATCH, in the same
# number of slots: Gradio lets enough of them in at once for the batches to fill.
MAX_BATCH = 16
BATCHED = {"concurrency_limit": 2 * MAX_BATCH, "concurrency_id": "batched"}
# Events waiting, all kinds together; beyond it a request is refused at once with Gradio's
# "This application is currently busy. Please try again." (QueueError in gradio_client).
QUEUE_SIZE = 64
# Integrated gradients' integration points (the Saliency tab, /saliency): one forward pass of the pair per
# point and a backward pass per target token through all of them. 32 points take ~0.8 s on a 20-token pair
# (bench/explain.py); 64 bounds a long sentence's request to seconds, not minutes.
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

# C0 and C1 control characters except tab, newline and carriage return. (Lone UTF-16 surrogates,
# LONE_SURROGATE, are replaced too: JSON can carry them, but UTF-8 and the Rust tokenizer cannot.)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


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
