"""Issue 43's bounded memory: sessions whose page closed, pages idle for long, and scripts' sessions idle
for a few minutes are forgotten (studio.server.sessions), their State freed; issue 55's: a page with nothing to keep
goes as a script's session does, and Gradio's records of forgotten sessions go with them."""
from __future__ import annotations

import datetime
import platform

import gradio as gr
import pytest

from studio.server import sessions


@pytest.fixture
def served():
    """A launched app with a State per session, its Forgetter, and the values whose State was freed."""
    client_module = pytest.importorskip("gradio_client")
    freed: list = []
    with gr.Blocks() as demo:
        kept = gr.State(None, delete_callback=freed.append)
        box = gr.Textbox()
        box.submit(lambda text, _: (text, text), inputs=[box, kept], outputs=[box, kept], api_name="echo")
        box.change(lambda text: text, inputs=box, outputs=box, api_name="look")  # sets no State
        forgetter = sessions.Forgetter(demo)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        yield demo, forgetter, freed, lambda: client_module.Client(demo.local_url, verbose=False)
    finally:
        demo.close()


def later(seconds: float) -> datetime.datetime:
    return datetime.datetime.now() + datetime.timedelta(seconds=seconds)


def test_scripts_sessions_are_forgotten_a_few_minutes_after_their_last_call(served):
    demo, forgetter, freed, client = served
    scripts = [client() for _ in range(3)]
    for i, script in enumerate(scripts):
        script.predict(f"call {i}", api_name="/echo")
    holder = demo.state_holder
    ours = {script.session_hash for script in scripts}
    assert ours <= set(holder.session_data)
    page = scripts[0].session_hash
    forgetter.page_opened(gr.Request(session_hash=page))  # this one loaded the page (a browser tab)
    assert forgetter.sweep(later(10)) == 0  # nobody idle long yet
    forgetter.sweep(later(sessions.API_IDLE_S + 1))
    assert set(holder.session_data) & ours == {page} and sorted(freed) == ["call 1", "call 2"]
    assert forgetter.sweep(later(sessions.PAGE_IDLE_S - 60)) == 0  # an open page keeps its state for long
    holder.session_data[page].is_closed = True  # ...until it is closed
    assert forgetter.sweep(later(sessions.CLOSED_S + 1)) == 1
    assert page not in holder.session_data and "call 0" in freed and not forgetter.pages


def test_a_page_with_nothing_to_keep_goes_as_a_scripts_session_does(served):
    demo, forgetter, freed, client = served
    looked, echoed = client(), client()
    looked.predict("only looking", api_name="/look")
    echoed.predict("a translation", api_name="/echo")
    for script in (looked, echoed):
        forgetter.page_opened(gr.Request(session_hash=script.session_hash))
    queue = demo._queue
    assert looked.session_hash in queue.pending_messages_per_session
    forgetter.sweep(later(sessions.API_IDLE_S + 1))
    holder = demo.state_holder
    assert looked.session_hash not in holder.session_data and echoed.session_hash in holder.session_data
    assert looked.session_hash not in queue.pending_messages_per_session
    assert looked.session_hash not in queue.pending_event_ids_session
    assert sessions.untouched(holder.session_data[echoed.session_hash]) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_studio_limits_malloc_arenas_on_glibc():
    assert sessions.limit_malloc_arenas()
