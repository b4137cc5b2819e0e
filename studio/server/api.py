"""The studio's API for scripts (gradio_client, Gradio's REST API): the explaining tabs' numbers, /score,
/attention, /attention_arithmetic and /saliency, and the training run's /train_status, JSON-able dicts checked
as the page checks its input (limits.clean_input on text, ranges on indices) and cut to the request's
budget (limits.Budget; a public studio's for a --public one); and publish_only(), which leaves every event but the
named endpoints (PUBLIC) to the page and answers input Gradio cannot read with a one-line error. docs/api.md
lists them all.

Indices count from 0, as core does (the tabs' "layer 1, head 1" is layer 0, head 0 here).
"""
from __future__ import annotations

import functools
import inspect
import logging
from typing import Any, Callable

import gradio as gr
from gradio.components.api_component import Api
from gradio.context import Context
from gradio.exceptions import ComponentProcessingError

from core.bundle import ModelBundle

from ..numbers import explanations
from ..text import clip, refusal
from ..train.job import TrainingJob
from . import batching
from .guard import guard
from .limits import BATCHED, HEAVY, serve_publicly
from .registry import UNAVAILABLE, ModelRegistry

# The endpoints a script may call, under names that stay (docs/api.md). Every other event is the page's own
# (private): its name, /wrapper_12 or /lambda_3, changed whenever the code did.
PUBLIC = ("translate", "beam_step", "beam_back", "beam_run", "beam_reset", "attention", "score",
          "attention_arithmetic", "saliency", "train_start", "train_pause", "train_resume", "train_stop",
          "train_save", "train_status", "train_view", "open_checkpoint", "compare", "knock_out", "logit_lens",
          "free_running", "contrast", "calibration")


def _checked(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A refusal becomes the client's error (gr.Error) with its reason; anything else, guard's message."""
    @functools.wraps(fn)  # its signature and type hints: Gradio reads the endpoint's parameters from them
    def call(*args, **kwargs) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except explanations.Refused as why:
            raise refusal(why) from None
    return guard(call)


def _bundle(registry: ModelRegistry, model: str) -> ModelBundle:
    try:
        return registry.get(model)
    except UNAVAILABLE as exc:
        raise explanations.Refused(str(exc)) from None


def _pair(registry: ModelRegistry, model: str, source: str, target: str) -> tuple[ModelBundle, dict[str, Any]]:
    """The model, and the pair as read (cleaned text and what cleaning did) for the answer's head."""
    bundle = _bundle(registry, model)
    source, source_notices = explanations.source_text(source)
    target, target_notices = explanations.target_text(target)
    return bundle, {"model": model, "source": source, "target": target,
                    "notices": [f"source: {n}" for n in source_notices] + [f"target: {n}" for n in target_notices]}


def _answer(head: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {**head, **body, "notices": head["notices"] + body["notices"]}


def publish_only(demo: gr.Blocks) -> None:
    """Every event of demo but PUBLIC's private: the page still calls it, clients cannot, the docs omit it. Input
    that Gradio cannot read (too few values, a word for a number) is refused in one line (plain_input_errors)."""
    for fn in demo.fns.values():
        if fn.api_name not in PUBLIC:
            fn.api_visibility = "private"
    plain_input_errors(demo)


def plain_input_errors(demo: gr.Blocks) -> None:
    """Gradio answers a call with too few values, or a value a component cannot read ("x" for a slider's number, a
    string for a file, a file's address it cannot fetch), with {"error": null} (show_error is off: other errors could
    tell a stranger too much) and a traceback in the log. Here each is a one-line error naming the value, before
    anything is run; a REST call to a named endpoint that leaves out its optional parameters gets their defaults, as
    gradio_client fills them in."""
    preprocess = demo.preprocess_data

    async def checked(block_fn: Any, inputs: list, state: Any, explicit_call: bool = False) -> Any:
        endpoint = f"/{block_fn.api_name}" if block_fn.api_name else "this event"
        names, defaults = _parameters(block_fn)
        missing = range(len(inputs), len(block_fn.inputs))
        if all(i in defaults for i in missing):
            inputs = list(inputs) + [defaults[i] for i in missing]
        if len(inputs) < len(block_fn.inputs):
            raise refusal(f"{endpoint} takes {len(block_fn.inputs)} values ({', '.join(names)}); got {len(inputs)}")
        try:
            return await preprocess(block_fn, inputs, state, explicit_call)
        except ComponentProcessingError:
            raise refusal(_unreadable(endpoint, block_fn.inputs, names, inputs)) from None
        except gr.Error as exc:  # a value not among a dropdown's choices (an unknown model, method or preset)
            if not exc.print_exception:
                raise
            raise refusal(f"{endpoint}: {clip(exc.message, 300)}") from None
        except Exception as exc:  # pydantic's ValidationError for a file that is not one, a ValueError for an address
            logging.getLogger("studio").warning("%s refused: %s", endpoint, clip(exc, 200))
            raise refusal(_unreadable(endpoint, block_fn.inputs, names, inputs, exc)) from None

    demo.preprocess_data = checked


def _parameters(block_fn: Any) -> tuple[list[str], dict[int, Any]]:
    """The names of an event's inputs (a gr.api endpoint's parameters, else the components' labels), and a gr.api
    endpoint's defaults by position (only those of its parameters that have one)."""
    if not block_fn.inputs or not all(isinstance(c, Api) for c in block_fn.inputs):  # all([]) would be True
        return [str(getattr(c, "label", None) or c.get_block_name()) for c in block_fn.inputs], {}
    parameters = list(inspect.signature(block_fn.fn).parameters.values())[:len(block_fn.inputs)]
    return [p.name for p in parameters], {i: p.default for i, p in enumerate(parameters) if p.default is not p.empty}


def _unreadable(endpoint: str, components: list, names: list[str], inputs: list, error: Exception | None = None) -> str:
    """Which value a component could not read, in words: the first number that is not one, the first file that is
    not one, or (error: what Gradio raised) the file it could not fetch."""
    for i, (component, value) in enumerate(zip(components, inputs)):
        what = f"{endpoint}: value {i + 1} ({clip(names[i], 60)})"
        if isinstance(component, (gr.Slider, gr.Number)) and not _is_number(value):
            return f"{what} must be a number; got {clip(repr(value), 40)}"
        if isinstance(component, gr.File) and not _is_file(value):
            return (f"{what} must be a file, {{\"path\": ...}} as gradio_client's handle_file sends it (or a list of "
                    f"them); got {clip(repr(value), 40)}")
    files = [i for i, c in enumerate(components) if isinstance(c, gr.File) and i < len(inputs) and inputs[i]]
    if error is not None and files:  # files of the right form, one of them not fetched (an address, a lost upload)
        return f"{endpoint}: value {files[0] + 1} ({clip(names[files[0]], 60)}) cannot be read: {clip(error, 120)}"
    return f"{endpoint}: one of its values cannot be read ({', '.join(clip(n, 60) for n in names)} expected)"


def _is_number(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _is_file(value: object) -> bool:
    """A file as Gradio's File reads it: none, {"path": ...} or {"url": ...}, or a list of those."""
    if isinstance(value, list):
        return all(_is_file(v) and v is not None for v in value)
    return value is None or (isinstance(value, dict) and isinstance(value.get("path") or value.get("url"), str))


def training_status(job: TrainingJob) -> dict:
    """The training run in numbers: state and message as the Train tab words them, step of max_steps, seconds
    trained and to go, the last step's record (loss, learning rate, ...) and the last evaluation's metrics."""
    view = job.view()
    last = view.evaluations[-1] if view.evaluations else None
    return {"run": view.run, "state": view.state, "message": view.message,
            "model": view.settings.name if view.settings else None, "step": view.step, "max_steps": view.max_steps,
            "elapsed_s": round(view.elapsed, 1), "eta_s": None if view.eta is None else round(view.eta, 1),
            "last_step": {k: explanations.finite(v) for k, v in view.history[-1].items()} if view.history else None,
            "last_evaluation": {"step": last.step, **{k: explanations.finite(v) for k, v in last.metrics.items()}}
            if last else None, "facts": view.facts}


def register(registry: ModelRegistry, job: TrainingJob) -> None:
    """Add the JSON endpoints to the Blocks being built; those that run the model share the decoding slots
    (limits.HEAVY; /score is batched, limits.BATCHED); /train_status, a copy of the run's state, waits for none.
    A public studio's job (--public) gives every request of these Blocks the public budget."""
    if job.public:
        serve_publicly(Context.root_block)

    def score(model: str, source: str, target: str) -> dict:
        """The model's log-probability of target as a translation of source, token by token (teacher forcing):
        tokens (<eos> last), ids, logprobs, probabilities, ranks (1: the model's first choice), the top 5
        alternatives per token, and totals (logprob, mean, perplexity, mean_rank)."""
        bundle, head = _pair(registry, model, source, target)
        try:  # batched with the /score requests that arrive meanwhile for this model (studio.server.batching)
            scored = batching.score(bundle, head["source"], head["target"], explanations.TOP_K, registry.key(model))
        except (TypeError, ValueError) as exc:
            raise explanations.Refused(str(exc)) from None
        return _answer(head, explanations.score_json(scored))

    def attention_arithmetic(model: str, source: str, target: str, stack: str = "cross", layer: int = 0,
                             head: int = 0, query: int = 0) -> dict:
        """Section 3.2's arithmetic for one query of one head, every number: stack "encoder", "decoder" or
        "cross"; layer, head and query counted from 0 (query: a position among query_tokens)."""
        bundle, pair = _pair(registry, model, source, target)
        a = explanations.arithmetic(bundle, pair["source"], pair["target"], stack, layer, head, query)
        return _answer(pair, explanations.arithmetic_json(a))

    def saliency(model: str, source: str, target: str, method: str = "grad_x_input", steps: int = 32) -> dict:
        """Attribution (method "grad_x_input" or "integrated_gradients", steps for the latter) beside the
        cross-attention averaged over layers and heads, their agreement and the word alignments."""
        bundle, head = _pair(registry, model, source, target)
        saliency = explanations.saliency(bundle, head["source"], head["target"], method, steps)
        return _answer(head, explanations.saliency_json(saliency))

    def attention(model: str, source: str, target: str = "", stack: str = "all", layer: int | None = None) -> dict:
        """Attention weights, teacher forced: encoder, decoder and cross (stack "all", or one of them), each
        [layer][head][query][key] (layer: one, from 0; None: all; the others null), with the tokens naming their
        rows and columns (target empty: the model's own translation, beam 4). Layers past the answer's budget
        (5 MB on a public studio) are null too, named in the notices."""
        bundle, head = _pair(registry, model, source, target)
        return _answer(head, explanations.attention_json(bundle, head["source"], head["target"], stack, layer))

    gr.api(_checked(score), api_name="score", **BATCHED)
    for fn in (attention, attention_arithmetic, saliency):
        gr.api(_checked(fn), api_name=fn.__name__, **HEAVY)

    def train_status() -> dict:
        """The training run's state, step, time, last loss and last evaluation (training_status)."""
        return training_status(job)

    gr.api(guard(train_status), api_name="train_status", concurrency_limit=None)
