"""The guard every callback runs in (studio/server/guard.py): a surprise becomes a readable error."""
from __future__ import annotations

import gradio as gr
import pytest

from studio.server.guard import NotServed, guard


def test_guard_turns_surprises_into_readable_errors():
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(gr.Error, match="RuntimeError.*boom"):
        guard(broken)()


@pytest.mark.parametrize("raised", [gr.Error(None), gr.Error(""), NotServed()])
def test_a_refusal_without_a_message_still_says_one(raised):
    """Gradio answers a gr.Error's message as it is: None went out as {"error": null}."""
    def refuse():
        raise raised

    with pytest.raises(gr.Error) as refused:
        guard(refuse)()
    assert refused.value.message == "refuse was refused (no reason was given)"
