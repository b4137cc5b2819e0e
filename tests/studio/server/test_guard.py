"""The guard every callback runs in (studio/server/guard.py): a surprise becomes a readable error."""
from __future__ import annotations

import gradio as gr
import pytest

from studio.server.guard import guard


def test_guard_turns_surprises_into_readable_errors():
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(gr.Error, match="RuntimeError.*boom"):
        guard(broken)()
