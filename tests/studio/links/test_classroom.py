"""A class that follows its lecturer (issue 64, studio/links/classroom.py): only the key moves, reveals and ends
it; each page's answer counted exactly once, from many threads at once; no session id kept; bounded classes and
answers; everything gone when the class ends or goes idle."""
from __future__ import annotations

import threading
from collections import Counter

import pytest

from studio.links import classroom
from studio.links.classroom import Classroom, is_code


def test_a_class_has_a_short_code_a_secret_key_and_starts_on_its_step():
    room = Classroom()
    lesson = room.start(steps=5, step=3)
    assert is_code(lesson.code) and len(lesson.key) >= 20
    assert room.state(lesson.code) == {"step": 3, "steps": 5, "version": 0, "revealed": False}
    assert room.state("ZZZZZ") is None and not is_code("abc") and not is_code("O0I1L")


def test_only_the_key_moves_reveals_and_ends_the_class():
    room = Classroom()
    lesson = room.start(steps=4)
    for wrong in ("", "nope", lesson.key[:-1], lesson.key + "x", None):
        assert not room.is_lecturer(lesson.code, wrong)
        with pytest.raises(ValueError, match="only the lecturer's page"):
            room.move(lesson.code, wrong, 2)
        with pytest.raises(ValueError, match="only the lecturer's page"):
            room.reveal(lesson.code, wrong)
        with pytest.raises(ValueError, match="only the lecturer's page"):
            room.end(lesson.code, wrong)
    assert room.state(lesson.code)["step"] == 1
    other = room.start(steps=4)
    assert not room.is_lecturer(lesson.code, other.key)  # another class's key moves only that class
    assert room.move(lesson.code, lesson.key, 9) == 4  # clamped to the lesson
    room.reveal(lesson.code, lesson.key)
    assert room.state(lesson.code) == {"step": 4, "steps": 4, "version": 2, "revealed": True}


def test_the_key_is_compared_in_constant_time(monkeypatch):
    compared = []
    real = classroom.hmac.compare_digest
    monkeypatch.setattr(classroom.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    room = Classroom()
    lesson = room.start(steps=2)
    assert room.is_lecturer(lesson.code, lesson.key) and not room.is_lecturer(lesson.code, "x")
    assert len(compared) == 2


def test_a_page_answers_once_and_may_change_its_answer_until_the_reveal():
    room = Classroom()
    lesson = room.start(steps=3, step=2)
    room.answer(lesson.code, "session-a", 2, "Hunde")
    room.answer(lesson.code, "session-a", 2, "Zwei")  # changed, not counted twice
    room.answer(lesson.code, "session-b", 2, "Hunde")
    assert sorted(room.answers(lesson.code, 2)) == ["Hunde", "Zwei"]
    assert room.answer_of(lesson.code, "session-a", 2) == "Zwei" and room.answer_of(lesson.code, "x", 2) is None
    with pytest.raises(ValueError, match="moved on to step 2"):
        room.answer(lesson.code, "session-c", 1, "Hunde")
    room.reveal(lesson.code, lesson.key)
    with pytest.raises(ValueError, match="the answer is out"):
        room.answer(lesson.code, "session-c", 2, "Hunde")


def test_no_session_id_is_kept_and_answers_go_when_the_class_ends():
    room = Classroom()
    lesson = room.start(steps=2)
    room.answer(lesson.code, "the-session-hash-of-a-page", 1, 42.0)
    kept = room._classes[lesson.code].answers[1]
    assert "the-session-hash-of-a-page" not in repr(kept) and list(kept.values()) == [42.0]
    room.end(lesson.code, lesson.key)
    assert room.state(lesson.code) is None and room.answers(lesson.code, 1) == []
    with pytest.raises(ValueError, match="this class has ended"):
        room.answer(lesson.code, "p", 1, 1.0)


def test_answers_from_many_threads_are_counted_exactly():
    room = Classroom()
    lesson = room.start(steps=1)
    pages, changes, threads = 400, 5, 16
    barrier = threading.Barrier(threads)

    def answer(worker: int) -> None:
        barrier.wait()
        for page in range(worker, pages, threads):
            for change in range(changes):  # each page changes its mind; its last answer stands
                room.answer(lesson.code, f"page-{page}", 1, f"option-{(page + change) % 3}")

    workers = [threading.Thread(target=answer, args=(w,)) for w in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    expected = Counter(f"option-{(page + changes - 1) % 3}" for page in range(pages))
    assert Counter(room.answers(lesson.code, 1)) == expected and sum(expected.values()) == pages


def test_classes_and_answers_are_bounded(monkeypatch):
    monkeypatch.setattr(classroom, "MAX_CLASSES", 2)
    monkeypatch.setattr(classroom, "MAX_ANSWERS", 3)
    room = Classroom()
    lesson = room.start(steps=1)
    room.start(steps=1)
    with pytest.raises(ValueError, match="2 classes are running here"):
        room.start(steps=1)
    for page in "abc":
        room.answer(lesson.code, page, 1, "x")
    with pytest.raises(ValueError, match="has its 3 answers"):
        room.answer(lesson.code, "d", 1, "x")
    room.answer(lesson.code, "a", 1, "y")  # a page that answered may still change its answer


def test_an_idle_class_ends_by_itself():
    now = [0.0]
    room = Classroom(clock=lambda: now[0])
    lesson = room.start(steps=3)
    now[0] = classroom.IDLE_S - 1
    room.move(lesson.code, lesson.key, 2)  # the lecturer's move keeps it going
    now[0] += classroom.IDLE_S - 1
    assert room.state(lesson.code)["step"] == 2
    now[0] += 2
    assert room.state(lesson.code) is None and room.running() == 0
    assert not room.is_lecturer(lesson.code, lesson.key)
