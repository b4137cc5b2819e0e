"""Every Gradio callback runs guarded: a request the studio does not serve (``NotServed``: slots.py turns it away
or stops it) says why, and an unexpected exception becomes a short readable message whose traceback goes to
the server log only."""
from __future__ import annotations

import functools
import logging
import typing
from typing import Callable

from ..text import clip, refusal


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

            if isinstance(exc, gr.Error):
                raise
            if isinstance(exc, NotServed):
                raise refusal(exc) from None
            logging.getLogger("studio").exception("callback %s failed", getattr(fn, "__name__", fn))
            raise refusal(f"Something went wrong ({type(exc).__name__}): {clip(exc, 300)}") from None

    # Gradio reads a callback's type hints to pass it the request (gr.Request): resolve them
    # where fn was written, since the wrapper's module has no `gr` to resolve "gr.Request" with.
    try:
        wrapper.__annotations__ = typing.get_type_hints(fn)
    except (NameError, TypeError):  # a partial, or hints that do not resolve: nothing to pass on
        pass
    return wrapper
