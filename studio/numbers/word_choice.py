"""The numbers behind the Word choice tab and its endpoints (/logit_lens, /free_running, /contrast, /calibration):
where each output word is decided (core.explain.logit_lens), how the model is trained against how it translates
(core.explain.free_running), why one word and not another (core.explain.contrast), and how sure it is against how
often it is right, section 5.4's label smoothing claim (core.explain.calibration), within the request's budget.
No Gradio here; every refusal is an ``explanations.Refused`` naming what was wrong.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from core.bundle import ModelBundle
from core.explain.calibration import SmoothingComparison, compare_calibration
from core.explain.contrast import OBJECTIVES, Contrast, contrast
from core.explain.saliency import METHODS
from core.explain.free_running import FreeRunning, free_running
from core.explain.logit_lens import LogitLens, logit_lens
from core.inference.options import DecodeOptions
from core.inference.scoring import prepare_pair

from ..server import slots
from ..server.limits import (
    CPU_FLOPS_PER_S,
    MAX_IG_STEPS,
    forward_flops,
)
from ..server.registry import UNAVAILABLE, ModelRegistry
from .comparison import PROGRESS_BATCH, affordable_pairs, corpus_pairs, first_pairs
from .explanations import Refused, finite, floats, source_text, target_text, whole_number

# The tab's first view (issue 62): where is "dogs" decided, would the model have said "are playing", why "dogs"
# and not "cat"?
FIRST_SOURCE, FIRST_REFERENCE, FIRST_POSITION, FIRST_FOIL = ("Zwei Hunde spielen im Schnee.",
                                                             "Two dogs are playing in the snow.", 1, "cat")
GREEDY = DecodeOptions(method="greedy")
TOP_K, MAX_TOP_K = 5, 20
CONTRAST_STEPS = 32  # integrated gradients' points for a contrast (~0.1 s on a short sentence)
BINS = 10


def model(registry: ModelRegistry, name: str | None) -> ModelBundle:
    try:
        return registry.get(name)
    except UNAVAILABLE as exc:
        raise Refused(str(exc)) from None


def _pass_seconds(bundle: ModelBundle, source: str, target_tokens: int = 0) -> float:
    """One teacher-forced pass of the source and a target of the model's longest output (source + 50 tokens)."""
    config = bundle.model.config
    tokens = min(len(bundle.tokenizer.encode(source)) + 1, config.max_len)
    return forward_flops(config, tokens, target_tokens or min(tokens + 50, config.max_len)) / CPU_FLOPS_PER_S


def _checked(call: Callable[[], Any], estimate: float) -> Any:
    with slots.heavy(estimate):
        try:
            return call()
        except (TypeError, ValueError) as exc:
            raise Refused(str(exc)) from None


# ----- layer by layer ------------------------------------------------------------------------------
def lens(bundle: ModelBundle, source: object, top_k: object = TOP_K) -> LogitLens:
    """The logit lens of the model's own greedy translation of source."""
    text, _ = source_text(source)
    k = whole_number(top_k, "top_k")
    if not 1 <= k <= MAX_TOP_K:
        raise Refused(f"top_k must be from 1 to {MAX_TOP_K}; got {k}")
    return _checked(lambda: logit_lens(bundle, text, None, k, GREEDY), 3 * _pass_seconds(bundle, text))


def lens_json(lens: LogitLens) -> dict[str, Any]:
    return {"source_tokens": lens.source_tokens, "tokens": lens.tokens, "final_norm": lens.final_norm,
            "layers": [{"top_tokens": lens.top_tokens[i], "top_probabilities": floats(lens.top_probabilities[i]),
                        "probability": floats(lens.probabilities[i]), "rank": lens.ranks[i].tolist()}
                       for i in range(len(lens.top_tokens))],
            "decided_at": lens.decided_at, "notices": lens.notices}


# ----- teacher forcing against free running ---------------------------------------------------------
def exposure(bundle: ModelBundle, source: object, reference: object) -> FreeRunning:
    """The reference scored after its own prefix and after the model's greedy one."""
    text, _ = source_text(source)
    ref, _ = target_text(reference)
    if not ref.strip():
        raise Refused("the reference is empty: type the translation the model should be measured against")
    return _checked(lambda: free_running(bundle, text, ref, GREEDY), 4 * _pass_seconds(bundle, text))


def exposure_json(f: FreeRunning) -> dict[str, Any]:
    forced, free = f.log_probabilities
    return {"source_tokens": f.source_tokens, "reference": f.reference, "greedy": f.greedy,
            "teacher_forced": floats(f.forced), "teacher_forced_choice": f.forced_choice,
            "free_running": floats(f.free),
            "diverges_at": f.diverges_at, "said_there": f.said_there,
            "logprob_teacher_forced": finite(forced), "logprob_free_running": finite(free), "notices": f.notices}


# ----- why this word and not that one -----------------------------------------------------------------
def why_not(bundle: ModelBundle, source: object, position: object, foil: object, objective: object = "probability",
            target: object = "", method: object = "integrated_gradients", steps: object = CONTRAST_STEPS) -> Contrast:
    """The contrast at position (from 0) of target (blank: the model's own greedy translation) against foil;
    integrated gradients with as many of steps as the request's budget affords."""
    text, _ = source_text(source)
    if objective not in OBJECTIVES:
        raise Refused(f"unknown objective {str(objective)[:20]!r}; allowed: {', '.join(OBJECTIVES)}")
    if method not in METHODS:
        raise Refused(f"unknown attribution method {str(method)[:30]!r}; allowed: {', '.join(METHODS)}")
    at, points = whole_number(position, "position"), whole_number(steps, "steps")
    if not 1 <= points <= MAX_IG_STEPS:
        raise Refused(f"steps must be from 1 to {MAX_IG_STEPS}; got {points}")
    points = 1 if method == "grad_x_input" else points
    one = 2 * _pass_seconds(bundle, text)  # a forward and a backward pass per point
    wanted = target_text(target)[0] if isinstance(target, str) and target.strip() else None
    foil = foil if isinstance(foil, (str, int)) and not isinstance(foil, bool) else str(foil)
    # "␣dogs" as the studio shows a token (plots.shown): the tokenizer's metaspace "▁" again.
    foil = foil.replace("\u2423", "\u2581") if isinstance(foil, str) else foil
    cut = min(points, max(1, int(slots.current_budget().cpu_s // one)))
    c = _checked(lambda: contrast(bundle, text, at, foil, target=wanted, objective=objective, method=method,
                                  steps=cut, options=GREEDY), (cut + 3) * one)
    if cut < points:
        c.notices.append(f"integrated gradients: {cut} steps used, not the {points} asked, to stay within the "
                         f"request's budget")
    return c


def runner_up(lens: LogitLens, position: int) -> str:
    """The last layer's second choice at position: a foil worth asking about."""
    return lens.top_tokens[-1][position][1] if len(lens.top_tokens[-1][position]) > 1 else lens.tokens[position]


def contrast_json(c: Contrast) -> dict[str, Any]:
    return {"source_tokens": c.source_tokens, "tokens": c.tokens, "position": c.position, "token": c.token,
            "foil": c.foil, "probability": finite(c.probability), "foil_probability": finite(c.foil_probability),
            "difference": finite(c.difference), "objective": c.objective, "method": c.method,
            "attribution": floats(c.attribution),
            "attribution_normalized": floats(c.normalized), "cross_attention": floats(c.cross_attention),
            "notices": c.notices}


def target_tokens(bundle: ModelBundle, source: str, target: Sequence[int]) -> list[str]:
    """A pair's target tokens as the contrast reads them, "<eos>" last (the position picker's choices)."""
    return prepare_pair(bundle, source, target).tokens


# ----- calibration (5.4) ------------------------------------------------------------------------------
def calibration_view(registry: ModelRegistry, names: Sequence[str | None], corpus: str, split: str, n: object,
                     on_batch: Callable[[int], None] | None = None
                     ) -> tuple[list[SmoothingComparison], str, list[str]]:
    """Each named model's (one, or two of one language pair) calibration, perplexity and greedy BLEU on the first n
    pairs of a corpus split, as many as the request's budget affords: the comparisons, the pairs in words, the
    notices."""
    names = list(dict.fromkeys(name for name in names if name))
    if not names:
        raise Refused("pick a model")
    bundles = [model(registry, name) for name in names]
    if len(names) == 2 and registry.languages(names[0]) != registry.languages(names[1]):
        raise Refused(f"{names[0]} and {names[1]} translate different language pairs: one corpus cannot measure both")
    asked, described, _ = corpus_pairs(corpus, split, n, bundles[0])
    pairs, seconds, notices = affordable_pairs(bundles, asked, measured="measured")
    described = first_pairs(described, len(asked), len(pairs))
    with slots.heavy(seconds) as work:
        def progress(k: int) -> None:
            work.check()
            if on_batch is not None:
                on_batch(k)
        try:
            compared = compare_calibration(bundles, pairs, DecodeOptions(method="greedy",
                                                                                batch_size=PROGRESS_BATCH),
                                           BINS, progress)
        except ValueError as exc:
            raise Refused(str(exc)) from None
    for comparison, name in zip(compared, names):
        comparison.name = name
    return compared, described, notices


def calibration_json(compared: list[SmoothingComparison], described: str) -> dict[str, Any]:
    return {"on": described, "models": [
        {"model": c.name, "label_smoothing": c.label_smoothing, "ece": finite(c.calibration.ece),
         "perplexity": finite(c.calibration.perplexity), "top1_accuracy": finite(c.calibration.top1),
         "mean_confidence": finite(c.calibration.mean_confidence), "bleu": finite(c.bleu.bleu),
         "chrf": finite(c.bleu.chrf), "tokens": c.calibration.tokens, "sentences": c.calibration.sentences,
         "bins": {"edges": floats(c.calibration.edges), "count": c.calibration.counts.tolist(),
                  "confidence": floats(c.calibration.confidence), "accuracy": floats(c.calibration.accuracy)}}
        for c in compared]}
