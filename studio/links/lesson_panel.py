"""The Lesson panel (issue 53): the studio's lesson (lesson.py) one step at a time. Each step is a deep link;
Next and Previous open the step's address, so the whole page moves to its view, and the panel shows the step's
notes to the presenter. In presenter mode a clicker's Page Down and Page Up press them (static/lesson_keys.js).
With classes on (class_panel.py), "Start a class" makes the room's pages follow this one."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..components import script
from ..text import md
from .address import View
from .lesson import Lesson

# A button opens the address its hidden box holds (static/lesson_open.js).
OPEN_JS = script("lesson_open.js")


@dataclass
class LessonPanel:
    panel: gr.Accordion
    step: gr.Markdown
    notes: gr.Markdown
    previous: gr.Button
    next: gr.Button
    previous_link: gr.Textbox
    next_link: gr.Textbox
    start_class: gr.Button | None  # None: the studio serves no classes

    @property
    def outputs(self) -> list:
        return [self.panel, self.step, self.notes, self.previous_link, self.next_link, self.previous, self.next]


def build(lesson: Lesson, classes: bool = False) -> LessonPanel:
    """The panel, folded until a page is opened on one of the lesson's steps; classes: with "Start a class"."""
    with gr.Accordion(f"Lesson: {lesson.title}", open=False, elem_id="lesson-panel") as panel:
        step = gr.Markdown(f"{len(lesson.steps)} steps. **Next** opens the first.", elem_id="lesson-step")
        notes = gr.Markdown(elem_id="lesson-notes")
        with gr.Row():
            previous = gr.Button("◀ Previous", size="sm", interactive=False, elem_id="lesson-previous")
            following = gr.Button("Next ▶", size="sm", variant="primary", elem_id="lesson-next")
            start = gr.Button("Start a class: the room's pages follow this one", size="sm",
                              elem_id="lesson-class-start") if classes else None
        previous_link = gr.Textbox(visible=False)
        next_link = gr.Textbox(lesson_link(lesson, 0), visible=False)
    parts = LessonPanel(panel, step, notes, previous, following, previous_link, next_link, start)
    previous.click(None, inputs=previous_link, js=OPEN_JS)
    following.click(None, inputs=next_link, js=OPEN_JS)
    return parts


def lesson_link(lesson: Lesson, index: int) -> str:
    """The address (from "?") of step index (from 0), marked as that step of the lesson; "" past either end."""
    if not 0 <= index < len(lesson.steps):
        return ""
    link = lesson.steps[index].link
    return f"{link}{'&' if len(link) > 1 else ''}lesson={index + 1}"


def shown(lesson: Lesson, view: View | None) -> tuple:
    """The panel for a page opened on view: open on its step with that step's notes and neighbours, or as it is
    when the page is not one of the lesson's steps."""
    if view is None or view.lesson is None:
        return (gr.skip(),) * 7
    index = min(view.lesson, len(lesson.steps)) - 1
    step = lesson.steps[index]
    heading = f"**Step {index + 1} of {len(lesson.steps)}: {md(step.heading)}**"
    return (gr.Accordion(open=True), heading, step.notes, lesson_link(lesson, index - 1),
            lesson_link(lesson, index + 1), gr.Button(interactive=index > 0),
            gr.Button(interactive=index + 1 < len(lesson.steps)))
