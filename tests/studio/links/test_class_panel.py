"""The class on the page (issue 64, studio/links/class_panel.py), without a browser: a page in no class is left as
it is; the lecturer's page moves the class; a student's answer is checked and counted once a page; what a
student's page may not do is said in one line; the routes followers poll answer a few bytes, and the class link
opens the lecturer's step."""
from __future__ import annotations

import gradio as gr
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from studio.links import class_panel
from studio.links.class_panel import Room, opened, routes, sent, shown, started
from studio.links.classroom import Classroom
from studio.links.lesson import parse_lesson
from studio.server.guard import guard
from tests.helpers.studio import SENTENCES, studio_registry

SOURCE = SENTENCES[0].replace(" ", "+")
LESSON = parse_lesson(f"""# Two steps

## Translate
[Open](?model=studio-tiny&source={SOURCE})

## Which one?
Ask choice: Which translation will beam search keep?
[Open](?tab=beam-search&model=studio-tiny&source={SOURCE}&beam=3)
""")
ORIGIN = "http://studio.example/"


@pytest.fixture
def room() -> Room:
    return Room(Classroom(), LESSON, studio_registry())


def test_a_page_in_no_class_is_left_as_it_is(room):
    place, box = opened(room, "", "", ORIGIN, "1")[:4], opened(room, "", "", ORIGIN, "1")[4:]
    assert place == ("", "", ORIGIN, "1") and all(isinstance(part, dict) and part.get("__type__") == "update"
                                                  and len(part) == 1 for part in box)  # every part gr.skip()
    assert "mistyped" in opened(room, "abc", "", ORIGIN, "1")[5]
    assert "No class ZZZZZ here" in opened(room, "zzzzz", "", ORIGIN, "1")[5]


def test_the_lecturers_page_moves_the_class_and_a_students_does_not(room):
    kept, code, key, *box = started(room, ORIGIN, "1")
    assert kept == f"class={code}&key={key}" and "http://studio.example/class/" + code in box[1]
    opened(room, code, "not the key", ORIGIN, "2")  # a student's page on step 2 moves nothing
    assert room.classroom.state(code)["step"] == 1
    opened(room, code, key, ORIGIN, "2")
    assert room.classroom.state(code)["step"] == 2


def test_a_students_answer_is_checked_counted_once_and_revealed(room):
    _, code, key, *_ = started(room, ORIGIN, "2")
    options = room.asked(2).options
    for page in ("page-a", "page-a", "page-b"):
        assert "Your answer is in" in sent(room, code, "2", options[0], 50, page)
    assert room.classroom.answers(code, 2) == [options[0], options[0]]
    for bad in ("<script>", None, "x" * 10_000):
        with pytest.raises(ValueError, match="pick one of the answers shown"):
            sent(room, code, "2", bad, 50, "page-c")
    with pytest.raises(gr.Error, match="pick one of the answers shown"):  # on the page: one line, no traceback
        guard(sent)(room, code, "2", "<script>", 50, "page-c")
    with pytest.raises(ValueError, match="this step asks no question"):
        sent(room, code, "1", options[0], 50, "page-c")
    room.classroom.reveal(code, key)
    box = shown(room, code, "", ORIGIN, 2, page="page-a")
    assert "The model:" in box[10] and "Your answer: **" in box[8]
    with pytest.raises(ValueError, match="the answer is out"):
        sent(room, code, "2", options[0], 50, "page-c")


def test_followers_poll_a_few_bytes_and_the_class_link_opens_the_lecturers_step(room):
    client = TestClient(Starlette(routes=routes(room.classroom, LESSON)), follow_redirects=False)
    lesson_class = room.classroom.start(len(LESSON.steps), 2)
    state = client.get(f"/class/{lesson_class.code.lower()}/state")
    assert state.status_code == 200 and state.headers["cache-control"] == "no-store"
    assert state.json() == {"step": 2, "steps": 2, "version": 0, "revealed": False,
                            "link": LESSON.steps[1].link + "&lesson=2"} and len(state.content) < 300
    assert client.get("/class/ZZZZZ/state").status_code == 404
    assert client.get("/class/<b>/state").status_code == 404
    joined = client.get(f"/class/{lesson_class.code}")
    assert joined.status_code == 303
    assert joined.headers["location"] == f"../{LESSON.steps[1].link}&lesson=2#class={lesson_class.code}"
    assert client.get("/class/ZZZZZ").headers["location"] == "../#class=ZZZZZ"  # the page says it has ended


def test_only_the_key_moves_the_class_through_its_route(room):
    client = TestClient(Starlette(routes=routes(room.classroom, LESSON)))
    lesson_class = room.classroom.start(len(LESSON.steps))
    at = f"/class/{lesson_class.code}/step"
    for body in ({"key": "wrong", "step": 2}, {"step": 2}, {"key": ["x"], "step": 2}, [1, 2], "not json",
                 {"key": lesson_class.key, "step": "two"}):
        sent_body = body if isinstance(body, str) else None
        answer = client.post(at, content=sent_body) if sent_body else client.post(at, json=body)
        assert answer.status_code == 403 and room.classroom.state(lesson_class.code)["step"] == 1, body
    assert client.post(at, content=b'{"key": "' + b"x" * 300 + b'"}').status_code == 413
    assert client.post("/class/ZZZZZ/step", json={"key": lesson_class.key, "step": 2}).status_code == 403
    assert client.post(at, json={"key": lesson_class.key, "step": 2}).json() == {"step": 2}
    assert room.classroom.state(lesson_class.code)["step"] == 2


def test_the_command_lines_class_prints_both_links(room):
    printed = class_panel.started_here(room.classroom, LESSON, "127.0.0.1", 7860)
    assert "Students open:   http://127.0.0.1:7860/class/" in printed and "#class=" in printed and "&key=" in printed
