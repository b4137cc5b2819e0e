"""Every Gradio callback runs guarded: a request the studio does not serve (``NotServed``: slots.py turns it away
or stops it) says why, and an unexpected exception becomes a short readable message whose traceback goes to
the server log only."""
from __future__ import annotations

import functools
import logging
import typing
from typing import Callable

from ..text import clip, refusal


# What a callback raises for a request it refuses: an unknown model, method or preset (LookupError: the registry's
# "no model called ...", a KeyError), input core's checks cannot use (ValueError). Said in one line, logged without
# a traceback (issue 67: each refusal of an unknown name logged a full one).
REFUSED = (LookupError, ValueError)


def _in_words(exc: Exception) -> str:
    """exc's message (a KeyError's is its key: "unknown name 'x'")."""
    if isinstance(exc, KeyError) and exc.args:
        return f"unknown name {clip(str(exc.args[0]), 80)!r}"
    return clip(exc, 300) or type(exc).__name__


class NotServed(Exception):
    """A request the studio turns away or stops (slots.py): its session has enough requests in flight, its deadline
    passed, or its client left. The text says which, for the visitor (guard shows it as the error)."""


def guard(fn: Callable) -> Callable:
    """Wrap a Gradio callback: a request the studio does not serve (NotServed) becomes its message, an
    unexpected exception a short readable one (gr.Error, shown as a notice) whose traceback goes to the server
    log only."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            import gradio as gr

            if isinstance(exc, (gr.Error, NotServed)) and not str(getattr(exc, "message", exc) or "").strip():
                # Gradio sends a gr.Error's message as it is: None answered {"error": null}, which says nothing
                raise refusal(f"{getattr(fn, '__name__', 'this request')} was refused (no reason was given)") from None
            if isinstance(exc, gr.Error):
                raise
            if isinstance(exc, NotServed):
                raise refusal(exc) from None
            if isinstance(exc, REFUSED):  # a name it does not know, input it cannot use: said, no traceback
                logging.getLogger("studio").warning("callback %s refused: %s", getattr(fn, "__name__", fn),
                                                    clip(exc, 200))
                raise refusal(_in_words(exc)) from None
            logging.getLogger("studio").exception("callback %s failed", getattr(fn, "__name__", fn))
            raise refusal(f"Something went wrong ({type(exc).__name__}): {clip(exc, 300)}") from None

    # Gradio reads a callback's type hints to pass it the request (gr.Request): resolve them
    # where fn was written, since the wrapper's module has no `gr` to resolve "gr.Request" with.
    try:
        wrapper.__annotations__ = typing.get_type_hints(fn)
    except (NameError, TypeError):  # a partial, or hints that do not resolve: nothing to pass on
        pass
    return wrapper
