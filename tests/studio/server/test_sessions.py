"""Issue 43's bounded memory: sessions whose page closed, pages idle for long, and scripts' sessions idle
for a few minutes are forgotten (studio.server.sessions), their State freed; issue 55's: a page with nothing to keep
goes as a script's session does, and Gradio's records of forgotten sessions go with them; issue 64's: a session begins
without a copy of every block's configuration, and shows Gradio the same page as Gradio's own would."""
from __future__ import annotations

import datetime
import platform

import gradio as gr
import gradio.state_holder
import pytest

from studio import app
from studio.server import sessions
from tests.helpers.studio import studio_registry


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


def _page(state) -> list[dict]:
    return sorted(state.components, key=lambda config: config["id"])


def test_a_light_session_makes_no_copy_until_asked_and_then_shows_gradios_page():
    """On the studio's own page (456 blocks): the same configurations as Gradio's SessionState, before and after an
    event updates a block's value and replaces another block (a gr.update), as Gradio's deep-link snapshot reads
    them."""
    demo = app.build_app(studio_registry())
    gradios, light = gradio.state_holder.SessionState(demo), sessions.LightSession(demo)
    assert len(gradios.config_values) > 400 and light.config_values == {}
    assert _page(light) == _page(gradios)
    textbox, markdown = (next(b for b in demo.blocks.values() if isinstance(b, kind))
                         for kind in (gr.Textbox, gr.Markdown))
    for state in (gradios, light := sessions.LightSession(demo)):
        state._update_value_in_config(textbox._id, "ein neuer Satz")
        state[markdown._id] = gr.Markdown("replaced", elem_id="a-replaced-block")
    assert len(light.config_values) == 2
    assert _page(light) == _page(gradios)
    assert any(c["props"].get("value") == "ein neuer Satz" for c in _page(light) if c["id"] == textbox._id)


def test_a_rest_call_without_a_session_gets_a_light_one(served, monkeypatch):
    httpx = pytest.importorskip("httpx")
    monkeypatch.setattr(gradio.state_holder, "SessionState", gradio.state_holder.SessionState)  # put back after
    sessions.light_sessions()
    demo = served[0]
    with httpx.Client(base_url=demo.local_url, timeout=60) as http:
        event = http.post("/gradio_api/call/echo", json={"data": ["no session"]}).json()["event_id"]
        answer = http.get(f"/gradio_api/call/echo/{event}").text
    assert "no session" in answer
    made = [state for state in demo.state_holder.session_data.values() if isinstance(state, sessions.LightSession)]
    assert made and all(len(state.config_values) <= 2 for state in made)  # the echo's box, not the whole page
