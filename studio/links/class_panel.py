"""The class on the page (issue 64): the lecturer starts a class from the Lesson panel and gets a short link and a
QR code; a student's page opened on the link follows the lecturer's step (static/class_follow.js polls the tiny
/class/CODE/state route and opens the step's address, as Next does); a step's question is answered on the
students' pages, counted on the lecturer's, and revealed beside the model's own answer on every page.

The class's code and the lecturer's key travel in the address's fragment (``#class=CODE&key=KEY``): a browser never
sends it to a server, and Next and Previous keep it. The class itself is classroom.py's; the questions' answers
are computed once a step and model (questions.py), however many pages ask.
"""
from __future__ import annotations

import io
import json
import socket
import threading
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any
from urllib.parse import parse_qsl

import gradio as gr
import segno
from PIL import Image
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route

from ..plots.room import room_answers
from ..server.guard import guard
from ..server.registry import ModelRegistry
from ..text import md
from . import lesson_panel
from .address import read_link
from .classroom import Classroom, is_code
from .lesson import Lesson
from .questions import Asked, answer_label, asked, checked, tally

TICK_S = 1.0  # the lecturer's counts redrawn this often (when an answer came)
MAX_MOVE_BYTES = 200  # a move's JSON: a 22-character key and a step
FOLLOW_POLL_MS = 1000  # a follower's page reads the class's state this often: the lecturer's step within ~1 s
# The page's fragment read when the page loads: the class's code, the lecturer's key, the page's own address.
FRAGMENT_JS = ("() => { const h = new URLSearchParams(window.location.hash.slice(1)); "
               "return [h.get('class') || '', h.get('key') || '', window.location.origin + window.location.pathname, "
               "new URLSearchParams(window.location.search).get('lesson') || '']; }")
# After Start: the lecturer's page keeps the code and key in its fragment (no reload); after End it drops them.
KEEP_JS = "(kept) => { history.replaceState(null, '', window.location.pathname + window.location.search + " \
          "(kept ? '#' + kept : '')); }"


@dataclass
class Room:
    """What the class's callbacks share: the classes, the lesson and the models, and each step's question put to
    the model once per model version."""
    classroom: Classroom
    lesson: Lesson
    registry: ModelRegistry
    _asked: dict = field(default_factory=dict)  # step -> (the model's registry key, its Asked)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, step: int) -> Asked | None:
        """Step's question (from 1) put to its model (None: the step asks nothing)."""
        question = self.lesson.steps[step - 1].question
        if question is None:
            return None
        view = read_link(dict(parse_qsl(self.lesson.steps[step - 1].link[1:])), self.registry.names())
        if view.model is None:
            raise ValueError(f"step {step} asks a question, but its model is not on offer here")
        key = self.registry.key(view.model)
        with self._lock:  # the first page to ask computes it; the rest wait for it, then read it
            if self._asked.get(step, (None,))[0] != key:  # one answer a step: the model's newest version
                self._asked[step] = (key, asked(self.registry.get(view.model), question, view))
            return self._asked[step][1]


@dataclass
class ClassPanel:
    room: Room
    box: gr.Column
    heading: gr.Markdown
    qr_fold: gr.Accordion
    qr: gr.Image
    prompt: gr.Markdown
    choice: gr.Radio
    number: gr.Slider
    send: gr.Button
    said: gr.Markdown
    figure: gr.Plot
    result: gr.Markdown
    reveal: gr.Button
    end: gr.Button
    timer: gr.Timer
    code: gr.Textbox
    key: gr.Textbox
    origin: gr.Textbox
    step: gr.Textbox  # the page's lesson step, as its address says ("" off the lesson)
    kept: gr.Textbox  # what the lecturer's fragment holds
    refresh: gr.Button  # pressed on a reveal (class_follow.js) and on a step opened in place
    seen: gr.State  # the answers the lecturer's figure was drawn with
    start: gr.Button | None = None  # the Lesson panel's "Start a class" (wire() sets it): hidden while in a class

    @property
    def shown(self) -> list:
        return [self.box, self.heading, self.qr_fold, self.qr, self.prompt, self.choice, self.number, self.send,
                self.said, self.figure, self.result, self.reveal, self.end, self.timer, self.seen, self.start]


# ----- what a page shows ---------------------------------------------------------------------------------------
def page_step(text: str) -> int | None:
    """The page's lesson step from its address's lesson=N (None: not a step)."""
    try:
        return int(float(text)) if text else None
    except (ValueError, OverflowError):
        return None


@lru_cache(maxsize=32)
def qr_image(link: str) -> Image.Image:
    """The link as a QR code a projector shows and a phone across the room reads."""
    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=10, border=2)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def class_link(origin: str, code: str) -> str:
    """The students' link on the address the lecturer's page was opened at (as its own script read it: bounded, and
    no backquote to end the code span it is shown in)."""
    return f"{origin[:200].replace('`', '').rstrip('/')}/class/{code}"


def _nothing() -> tuple:
    """A page that is in no class: its box untouched (the studio as it is)."""
    return (gr.skip(),) * 16


def _notice(text: str) -> tuple:
    """The box with one line in it (a class that ended, a mistyped code), nothing else."""
    hidden = gr.update(visible=False)
    return (gr.Column(visible=True), text, gr.Accordion(visible=False), gr.skip(), "", hidden, hidden, hidden, "",
            hidden, "", hidden, hidden, gr.Timer(active=False), None, gr.Button(visible=True))


def _room_part(room: Room, code: str, step: int, lecturer: bool) -> tuple:
    """The question of step (from 1): its prompt, the answer controls (a student's, until the reveal), the room's
    answers (the lecturer's; everyone's once revealed), the line under them and how many answers it counts."""
    hidden = gr.update(visible=False)
    try:
        question = room.asked(step)
    except (ValueError, LookupError) as exc:
        return f"*This step's question cannot be asked: {md(str(exc))}*", hidden, hidden, hidden, hidden, "", None
    if question is None:
        return "", hidden, hidden, hidden, hidden, "", None
    state = room.classroom.state(code) or {}
    revealed = bool(state.get("step") == step and state.get("revealed"))
    answers = room.classroom.answers(code, step)
    names, counts = tally(question, answers)
    asking = not lecturer and not revealed
    choice = gr.Radio(choices=list(question.options), value=None, visible=asking and bool(question.options))
    number = gr.Slider(visible=asking and not question.options)
    figure = gr.Plot(room_answers(names, counts, answer_label(question) if revealed else None),
                     visible=lecturer or revealed)
    if revealed:
        line = _verdict(question, names, counts)
    elif lecturer:
        line = f"{len(answers)} answer{'s' * (len(answers) != 1)} so far. **Reveal** shows the model's answer."
    else:
        line = "Answer on this page: the lecturer reveals the model's answer."
    return f"### Question: {md(question.question.prompt)}", choice, number, gr.Button(visible=asking), figure, line, \
        len(answers)


def _verdict(question: Asked, names: tuple[str, ...], counts: list[int]) -> str:
    """The model's answer beside the room's guess."""
    unit = "%" if question.question.kind == "number" else ""
    model = f"**The model:** {md(str(question.answer))}{unit}. {md(question.why)}"
    total = sum(counts)
    if not total:
        return model + "\n\n**The room:** no answers."
    top = max(range(len(counts)), key=counts.__getitem__)
    right = counts[names.index(answer_label(question))]
    room = f"{right} of {total} ({right / total:.0%}) said {md(answer_label(question))}, as the model"
    if names[top] != answer_label(question) and counts[top] > right:
        room = f"most said {md(names[top])} ({counts[top]} of {total}); {room}"
    return model + f"\n\n**The room:** {room}."


def shown(room: Room, code: str, key: str, origin: str, step: int | None, page: str = "", fold_qr: bool = True
          ) -> tuple:
    """The class box for a page in class code: the lecturer's (the key is the class's) or a student's (page: its
    session, whose own answer the reveal shows beside the model's)."""
    state = room.classroom.state(code)
    if state is None:
        return _notice(f"**No class {md(code)} here:** it has ended, or the link is mistyped. The studio works "
                       f"as ever.")
    lecturer = room.classroom.is_lecturer(code, key)
    at = step or state["step"]
    prompt, choice, number, send, figure, line, seen = _room_part(room, code, at, lecturer)
    if lecturer:
        link = class_link(origin, code)
        heading = (f"## Class {code} · step {state['step']} of {state['steps']}\n### Students open `{link}`\n"
                   f"(or scan the QR code): their pages follow yours. Only this page moves the class.")
        qr = (gr.Accordion(visible=True, open=not fold_qr), qr_image(link))
    else:
        heading = f"**Class {code}** · the lecturer is on step {state['step']} of {state['steps']}"
        qr = (gr.Accordion(visible=False), gr.skip())
    asks, out = prompt != "", state["revealed"] and at == state["step"]
    student_line = _own_answer(room, code, page, at) if out and asks else line
    return (gr.Column(visible=True), heading, *qr, prompt, choice, number, send,
            "" if lecturer else student_line, figure, line if lecturer or out else "",
            gr.Button(visible=lecturer and asks, interactive=not out), gr.Button(visible=lecturer),
            gr.Timer(active=lecturer and asks and not out), seen, gr.Button(visible=False))


def _own_answer(room: Room, code: str, page: str, step: int) -> str:
    """What a student's page answered, shown by the reveal."""
    own = room.classroom.answer_of(code, page, step) if page else None
    if own is None:
        return "This page did not answer."
    return f"Your answer: **{md(_said(own))}**."


def _said(value: str | float) -> str:
    return f"{value:g}%" if isinstance(value, float) else value


# ----- the callbacks -------------------------------------------------------------------------------------------
def opened(room: Room, code: str, key: str, origin: str, step_text: str, page: str = "") -> tuple:
    """On load: a page in a class keeps its fragment's code and key, and shows its box (the lecturer's page moves
    the class to its own step); any other page is left as it is."""
    code = (code or "").strip().upper()
    place = (code, key or "", origin or "", step_text or "")
    if not code:  # the page's own place still kept: Start reads it
        return place + _nothing()
    if not is_code(code):
        return place + _notice("**This class link is mistyped:** a class's code is five letters and digits.")
    step = page_step(step_text)
    if step is not None and room.classroom.is_lecturer(code, key):
        step = room.classroom.move(code, key, step)
        try:  # the step's question put to the model now, before the students' pages ask for it
            room.asked(step)
        except (ValueError, LookupError):
            pass  # said in the box that shown() draws
    return place + shown(room, code, key, origin, step, page)


def started(room: Room, origin: str, step_text: str) -> tuple:
    """Start a class on the page's step: the lecturer's fragment (code and key), its code and key, and the box."""
    lesson = room.classroom.start(len(room.lesson.steps), page_step(step_text) or 1)
    kept = f"class={lesson.code}&key={lesson.key}"
    return (kept, lesson.code, lesson.key,
            *shown(room, lesson.code, lesson.key, origin, page_step(step_text) or 1, fold_qr=False))


def sent(room: Room, code: str, step_text: str, choice: str | None, number: float, page: str) -> str:
    """A student's answer counted (once a page: a second one replaces it); what the page says back."""
    step = page_step(step_text) or (room.classroom.state(code) or {}).get("step", 0)
    question = room.asked(step) if 1 <= step <= len(room.lesson.steps) else None
    if question is None:
        raise ValueError("this step asks no question")
    value = checked(question, choice if question.options else number)
    if not page:
        raise ValueError("answers come from a page of the studio")
    room.classroom.answer(code, page, step, value)
    return f"✓ Your answer is in: **{md(_said(value))}**. You may change it until the lecturer reveals."


def ticked(room: Room, code: str, key: str, step_text: str, seen: int | None) -> tuple:
    """The lecturer's counts, redrawn when an answer came since the last tick."""
    step = page_step(step_text) or (room.classroom.state(code) or {}).get("step", 0)
    if not room.classroom.is_lecturer(code, key) or len(room.classroom.answers(code, step)) == seen:
        return gr.skip(), gr.skip(), gr.skip()
    _, _, _, _, figure, said, seen = _room_part(room, code, step, True)
    return figure, said, seen


def revealed(room: Room, code: str, key: str, origin: str, step_text: str) -> tuple:
    room.classroom.reveal(code, key)
    return shown(room, code, key, origin, page_step(step_text))


def ended(room: Room, code: str, key: str) -> tuple:
    room.classroom.end(code, key)
    return ("", "", "", *_notice(f"**Class {md(code)} has ended;** its answers are gone."))


def _page(request: gr.Request | None) -> str:
    """The page's Gradio session ("" for a call without one)."""
    return (request.session_hash or "") if request is not None else ""


# ----- on the page ---------------------------------------------------------------------------------------------
def build(room: Room) -> ClassPanel:
    """The class box, hidden until a page is in a class (wire() then connects it)."""
    hidden = dict(visible=False)
    # A column, not a group: a group's gaps take the border colour, which presenter mode darkens to #333.
    with gr.Column(visible=False, elem_id="class-box") as box:
        heading = gr.Markdown(elem_id="class-heading")
        with gr.Accordion("QR code of the class link", open=False, visible=False, elem_id="class-qr") as qr_fold:
            qr = gr.Image(show_label=False, interactive=False, height=320, buttons=["fullscreen"],
                          elem_id="class-qr-image")
        prompt = gr.Markdown(elem_id="class-question")
        choice = gr.Radio(label="Your answer", elem_id="class-choice", **hidden)
        number = gr.Slider(0, 100, value=50, step=1, label="Your guess (%)", elem_id="class-number", **hidden)
        send = gr.Button("Send my answer", variant="primary", elem_id="class-send", **hidden)
        said = gr.Markdown(elem_id="class-said")
        figure = gr.Plot(show_label=False, elem_id="class-answers", **hidden)
        result = gr.Markdown(elem_id="class-result")
        with gr.Row():
            reveal = gr.Button("Reveal the model's answer", variant="primary", scale=3, elem_id="class-reveal",
                               **hidden)
            end = gr.Button("End the class", variant="stop", size="sm", scale=0, min_width=140, elem_id="class-end",
                            **hidden)
    boxes = [gr.Textbox(**hidden) for _ in range(5)]
    refresh = gr.Button("Show the class's news", elem_id="class-refresh", elem_classes="class-offscreen")
    return ClassPanel(room, box, heading, qr_fold, qr, prompt, choice, number, send, said, figure, result, reveal,
                      end, gr.Timer(TICK_S, active=False), *boxes, refresh, gr.State(None))


def wire(demo: gr.Blocks, panel: ClassPanel, start: gr.Button) -> None:
    """The page's load, Start (the Lesson panel's button), Send, Reveal, End, the lecturer's timer and the
    followers' refresh. Each is trivial work (the questions' model work is cached a step), so none waits in line
    behind decoding."""
    room, panel.start = panel.room, start
    fast = dict(concurrency_limit=None, show_progress="hidden", api_visibility="private")
    place = [panel.code, panel.key, panel.origin, panel.step]
    # Gradio passes the request by its type: these take the page's session (what its answer is kept under).
    def open_page(code: str, key: str, origin: str, step_text: str, request: gr.Request) -> tuple:
        return opened(room, code, key, origin, step_text, _page(request))

    def send(code: str, step_text: str, choice: str | None, number: float, request: gr.Request) -> str:
        return sent(room, code, step_text, choice, number, _page(request))

    demo.load(guard(open_page), inputs=place, outputs=place + panel.shown, js=FRAGMENT_JS, **fast)
    start.click(guard(partial(started, room)), inputs=[panel.origin, panel.step],
                outputs=[panel.kept, panel.code, panel.key, *panel.shown], **fast).then(
        None, inputs=panel.kept, js=KEEP_JS)
    panel.send.click(guard(send), inputs=[panel.code, panel.step, panel.choice, panel.number],
                     outputs=panel.said, **fast)
    panel.reveal.click(guard(partial(revealed, room)), inputs=place, outputs=panel.shown, **fast)
    panel.end.click(guard(partial(ended, room)), inputs=[panel.code, panel.key],
                    outputs=[panel.kept, panel.code, panel.key, *panel.shown], **fast).then(
        None, inputs=panel.kept, js=KEEP_JS)
    panel.timer.tick(guard(partial(ticked, room)), inputs=[panel.code, panel.key, panel.step, panel.seen],
                     outputs=[panel.figure, panel.result, panel.seen], **fast)
    # A follower's page when the class's version changed (a reveal), and any page that opened a step in place
    # (open_in_place.js): the box drawn again for the address's step (the lecturer's moves the class there).
    panel.refresh.click(guard(open_page), inputs=place, outputs=place + panel.shown, js=FRAGMENT_JS, **fast)


# ----- the routes followers poll -------------------------------------------------------------------------------
def routes(classroom: Classroom, lesson: Lesson) -> list[Route]:
    """GET /class/CODE: the class's link, which opens the lecturer's step; GET /class/CODE/state: what followers
    poll (a few dozen bytes, no session, no queue); POST /class/CODE/step: the lecturer's page moving the class (its
    key in the body, never in an address)."""
    async def state(request: Request) -> JSONResponse:
        code = request.path_params["code"].upper()
        now = classroom.state(code) if is_code(code) else None
        if now is None:
            return JSONResponse({"error": "no such class: it has ended, or the code is mistyped"}, status_code=404,
                                headers={"Cache-Control": "no-store"})
        return JSONResponse({**now, "link": lesson_panel.lesson_link(lesson, now["step"] - 1)},
                            headers={"Cache-Control": "no-store"})

    async def step(request: Request) -> JSONResponse:
        """The lecturer's page's Next or Previous (static/class_lead.js): {"key": ..., "step": N}."""
        code = request.path_params["code"].upper()
        length = request.headers.get("content-length", "")
        if not length.isdigit() or int(length[:6]) > MAX_MOVE_BYTES:  # no body read past the bound
            return JSONResponse({"error": f"a move is at most {MAX_MOVE_BYTES} bytes of JSON"}, status_code=413)
        try:
            asked = json.loads(await request.body())
            moved = classroom.move(code, asked["key"], int(asked["step"])) if is_code(code) else None
        except (ValueError, KeyError, TypeError, OverflowError):
            moved = None
        if moved is None:
            return JSONResponse({"error": "only the lecturer's page moves this class (or it has ended)"},
                                status_code=403)
        return JSONResponse({"step": moved})

    async def join(request: Request) -> RedirectResponse:
        code = request.path_params["code"].upper()
        now = classroom.state(code) if is_code(code) else None
        link = lesson_panel.lesson_link(lesson, now["step"] - 1) if now else ""
        # Relative to /class/CODE: the studio's own root, behind a proxy's prefix too.
        return RedirectResponse(f"../{link}#class={code if is_code(code) else ''}", status_code=303)

    return [Route("/class/{code}/state", state), Route("/class/{code}/step", step, methods=["POST"]),
            Route("/class/{code}", join)]


def app_kwargs(classroom: Classroom | None, lesson: Lesson | None) -> dict[str, Any] | None:
    """What launch() gives Gradio's FastAPI app: the class routes, first (before Gradio's own)."""
    return {"routes": routes(classroom, lesson)} if classroom is not None and lesson else None


def started_here(classroom: Classroom, lesson: Lesson, host: str, port: int) -> str:
    """`--class`: a class started with the studio, and what the command line prints of it (a studio serving every
    address is named by this machine's name)."""
    address = f"http://{socket.gethostname() if host in ('0.0.0.0', '::') else host}:{port}"
    lesson_class = classroom.start(len(lesson.steps))
    first = lesson_panel.lesson_link(lesson, 0)
    return (f"Class {lesson_class.code} started.\n  Students open:   {class_link(address, lesson_class.code)}\n"
            f"  Lecturer's page: {address.rstrip('/')}/{first}#class={lesson_class.code}&key={lesson_class.key}\n"
            f"  (the key after key= moves the class: keep it to yourself)")
