"""A class that follows its lecturer (issue 64): which lesson step the lecturer shows, whether its question's
answer is revealed, and the room's answers, in memory only. No Gradio here.

A class has a short public code (on the projector, in its link) and a secret key that only the lecturer's page
holds: moving, revealing and ending take the key, compared in constant time. Followers read ``state`` (a step and
a version) and nothing else. An answer is kept under an HMAC of its page's session id with the class's own salt,
so a page answers a question once (it may change its answer until the reveal) and no session id, name or address
is kept; everything goes when the class ends, or when its lecturer has left it idle for ``IDLE_S``.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"  # no 0/O or 1/I/L to misread on a projector
CODE_LENGTH = 5
MAX_CLASSES = 16  # classes at once, all lecturers together
MAX_ANSWERS = 1_000  # pages answering one question
IDLE_S = 4 * 3600  # a class whose lecturer has not moved it for this long ends


@dataclass
class Class:
    code: str
    key: str
    steps: int
    step: int
    version: int = 0  # +1 at each move and reveal: what followers watch
    revealed: set[int] = field(default_factory=set)
    answers: dict[int, dict[str, str | float]] = field(default_factory=dict)  # step -> page (hashed) -> answer
    salt: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    touched: float = 0.0


class Classroom:
    """Every class of one studio; each method takes one lock, so an answer is counted exactly once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._classes: dict[str, Class] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def start(self, steps: int, step: int = 1) -> Class:
        """A new class of a lesson of steps steps, on step (from 1); ValueError when MAX_CLASSES are running."""
        with self._lock:
            self._forget_idle()
            if len(self._classes) >= MAX_CLASSES:
                raise ValueError(f"{MAX_CLASSES} classes are running here, the most at once; one ends when its "
                                 f"lecturer ends it, or after {IDLE_S // 3600} hours idle")
            code = self._new_code()
            lesson = Class(code, secrets.token_urlsafe(16), steps, _within(step, steps), touched=self._clock())
            self._classes[code] = lesson
            return lesson

    def state(self, code: str) -> dict | None:
        """What a follower reads: the step, the version, whether the step's answer is revealed (None: no class)."""
        with self._lock:
            lesson = self._classes.get(code)
            if lesson is None or self._idle(lesson):
                return None
            return {"step": lesson.step, "steps": lesson.steps, "version": lesson.version,
                    "revealed": lesson.step in lesson.revealed}

    def is_lecturer(self, code: str, key: str) -> bool:
        """Whether key is the class's (constant time)."""
        with self._lock:
            return self._held(code, key) is not None

    def move(self, code: str, key: str, step: int) -> int:
        """The class to step (clamped to the lesson's); the step it is on. ValueError without the key."""
        with self._lock:
            lesson = self._lecturers(code, key)
            step = _within(step, lesson.steps)
            if step != lesson.step:
                lesson.step, lesson.version = step, lesson.version + 1
            lesson.touched = self._clock()
            return step

    def reveal(self, code: str, key: str) -> None:
        """The model's answer to the current step's question shown to every page; its answers closed."""
        with self._lock:
            lesson = self._lecturers(code, key)
            if lesson.step not in lesson.revealed:
                lesson.revealed.add(lesson.step)
                lesson.version += 1
            lesson.touched = self._clock()

    def end(self, code: str, key: str) -> None:
        """The class and every answer gone."""
        with self._lock:
            self._lecturers(code, key)
            del self._classes[code]

    def answer(self, code: str, page: str, step: int, value: str | float) -> None:
        """page's answer (a checked value: questions.checked) to step's question, replacing its earlier one;
        ValueError when the class is elsewhere, the answer revealed, or the room full."""
        with self._lock:
            lesson = self._classes.get(code)
            if lesson is None or self._idle(lesson):
                raise ValueError("this class has ended")
            if step != lesson.step:
                raise ValueError(f"the lecturer has moved on to step {lesson.step}: this question is closed")
            if step in lesson.revealed:
                raise ValueError("the answer is out: this question is closed")
            answers = lesson.answers.setdefault(step, {})
            who = _page_key(lesson, page)
            if who not in answers and len(answers) >= MAX_ANSWERS:
                raise ValueError(f"this question has its {MAX_ANSWERS:,} answers, the most it takes")
            answers[who] = value

    def answer_of(self, code: str, page: str, step: int) -> str | float | None:
        """page's own answer to step's question (None: it gave none)."""
        with self._lock:
            lesson = self._classes.get(code)
            if lesson is None:
                return None
            return lesson.answers.get(step, {}).get(_page_key(lesson, page))

    def answers(self, code: str, step: int) -> list[str | float]:
        """The room's answers to step's question, one a page (none for a class that has ended)."""
        with self._lock:
            lesson = self._classes.get(code)
            return [] if lesson is None else list(lesson.answers.get(step, {}).values())

    def running(self) -> int:
        """How many classes are running."""
        with self._lock:
            self._forget_idle()
            return len(self._classes)

    # ----- under the lock ---------------------------------------------------------------------------------------
    def _held(self, code: str, key: str) -> Class | None:
        lesson = self._classes.get(code)
        if lesson is None or self._idle(lesson) or not isinstance(key, str):
            return None
        return lesson if hmac.compare_digest(key.encode(), lesson.key.encode()) else None

    def _lecturers(self, code: str, key: str) -> Class:
        lesson = self._held(code, key)
        if lesson is None:
            raise ValueError("only the lecturer's page moves this class (or it has ended)")
        return lesson

    def _idle(self, lesson: Class) -> bool:
        return self._clock() - lesson.touched > IDLE_S

    def _forget_idle(self) -> None:
        for code in [c for c, lesson in self._classes.items() if self._idle(lesson)]:
            del self._classes[code]

    def _new_code(self) -> str:
        while True:  # 32**5 codes for at most 16 classes: a clash is rare
            code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
            if code not in self._classes:
                return code


def _page_key(lesson: Class, page: str) -> str:
    """What an answer is kept under: the page's session id hashed with the class's salt (never the id itself)."""
    return hmac.new(lesson.salt, page.encode(), hashlib.sha256).hexdigest()[:24]


def is_code(text: object) -> bool:
    """Whether text could be a class's code (what a link or request may name)."""
    return isinstance(text, str) and len(text) == CODE_LENGTH and all(c in ALPHABET for c in text)


def _within(step: int, steps: int) -> int:
    return min(max(int(step), 1), steps)
