"""Issue 43's named API: every endpoint a script calls has a stable name (docs/api.md), every other event
is the page's own, and the endpoints check their input as the page does."""
from __future__ import annotations

import json

import pytest

from studio import app
from studio.server import api
from tests.helpers.studio import SENTENCES, studio_registry

NAME = "studio-tiny"


@pytest.fixture(scope="module")
def client():
    client_module = pytest.importorskip("gradio_client")
    demo = app.build_app(studio_registry())
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        yield client_module.Client(demo.local_url, verbose=False)
    finally:
        demo.close()


def test_only_the_named_endpoints_are_offered(client):
    named = set(client.view_api(return_format="dict", print_info=False)["named_endpoints"])
    assert named == {f"/{name}" for name in api.PUBLIC}  # no /wrapper_12, /lambda_3, /partial_1


def test_translate_says_what_it_did_with_a_beam_size_that_is_not_one(client):
    text, _, _, notes = client.predict(NAME, SENTENCES[0], "beam", "abc", 0.6, 10, 4, 1.0, 0, 1.0, "",
                                       api_name="/translate")
    assert text and "beam size 'abc' is not a number; using the default 4" in notes.replace("\\", "")


def test_attention_gives_every_map_with_its_tokens(client):
    maps = client.predict(model=NAME, source=SENTENCES[0], target="Ein Hund", api_name="/attention")
    json.dumps(maps, allow_nan=False)
    assert maps["target_tokens"] == ["Ein", "Hund", "<eos>"] and maps["decoder_tokens"][0] == "<bos>"
    layers, heads = len(maps["cross"]), len(maps["cross"][0])
    assert (len(maps["cross"][0][0]), len(maps["cross"][0][0][0])) == (3, len(maps["source_tokens"]))
    assert layers == len(maps["encoder"]) and heads == len(maps["decoder"][0])
    assert sum(maps["cross"][0][0][0]) == pytest.approx(1.0, abs=1e-3)
    own = client.predict(model=NAME, source=SENTENCES[0], api_name="/attention")  # no target: its translation
    assert own["translation"] and own["target_tokens"][-1] == "<eos>"
    with pytest.raises(Exception, match="the source sentence is empty"):
        client.predict(model=NAME, source="  ", api_name="/attention")


def test_beam_steps_go_on_in_the_clients_session(client):
    settings = (NAME, SENTENCES[0], 3, 0.6, "gnmt", 6)
    first = client.predict(None, *settings, api_name="/beam_step")
    second = client.predict(None, *settings, api_name="/beam_step")
    assert "step 1" in first[4].lower() and "step 2" in second[4].lower()


def test_train_status_before_any_run(client):
    status = client.predict(api_name="/train_status")
    assert status["state"] == "idle" and status["step"] == 0 and status["last_step"] is None


def test_a_translation_sets_off_no_server_call_beyond_its_own():
    """Issue 54, item 1: the explaining tabs follow the session's translation in the page (a hidden button each,
    clicked only while the tab is on screen: studio/static/refresh_on_screen.js); a Python function on its change
    would run one server call per tab at every translation (bench/click_to_paint.py counted ten)."""
    config = app.build_app(studio_registry()).config
    translate = next(d for d in config["dependencies"] if d["api_name"] == "translate")
    kinds = {c["id"]: c["type"] for c in config["components"]}
    current = next(o for o in translate["outputs"] if kinds[o] == "state")
    followers = [d for d in config["dependencies"] if [current, "change"] in [list(t) for t in d["targets"]]]
    assert followers and not [d["api_name"] for d in followers if d["backend_fn"]]


def test_the_queue_does_not_summarise_every_event_after_each_one():
    """Gradio recomputes a pandas summary of up to 10,000 past events after every event unless told how seldom
    (2-8 ms a request); the studio needs none of it (issue 54: a class's requests)."""
    demo = app.build_app(studio_registry()).queue()
    assert demo._queue.ANAYLTICS_CACHE_FREQUENCY >= 10_000
