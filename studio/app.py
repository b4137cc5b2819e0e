"""The studio's shell: model picker, status line, presenter switch, one tab per topic.

The tabs are built by studio/tabs/, and what they share (the Shell object, the picker's contents,
the current translation) lives in studio/shell.py; this module lays out the page, wires the
picker, and serves the page from the command line:

    python -m studio [--host 127.0.0.1] [--port 7860] [--checkpoint PATH] [--checkpoints-dir DIR]
                     [--share] [--public] [--lesson FILE] [--class] [--threads N]
"""
from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Gradio summarises every event it has recorded (up to 10,000, in a pandas frame) after each event, for a
# monitoring page the studio does not use: 2 ms a request at first, 8 ms after a lecture's 10,000 requests.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "100000")

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from . import plots  # noqa: E402
from .components import script, stylesheet  # noqa: E402
from .links import class_panel, deep_links, lesson_panel  # noqa: E402
from .links.classroom import Classroom  # noqa: E402
from .links.lesson import Lesson, read_lesson  # noqa: E402
from .server import api, compiled_models, sessions  # noqa: E402
from .server.guard import guard  # noqa: E402
from .server.limits import (  # noqa: E402
    DEFAULT_CONCURRENCY,
    MAX_UPLOAD_BYTES,
    MAX_UPLOAD_MB,
    PUBLIC_MAX_MINUTES,
    PUBLIC_MAX_PARAMETERS,
    QUEUE_SIZE,
)
from .server.registry import CHECKPOINTS, ModelRegistry  # noqa: E402
from .server.uploads import open_checkpoint, remove_stale_copies  # noqa: E402
from .shell import Shell, refresh, status_line  # noqa: E402
from .tabs import (  # noqa: E402
    arithmetic,
    attention,
    beam,
    compare,
    knockout,
    model_view,
    positional,
    saliency,
    translate,
    what_if,
    word_choice,
)
from .train import job as training  # noqa: E402
from .train import live as train_live  # noqa: E402
from .train import tab as train  # noqa: E402

# Gradio's default theme, with colours that read (WCAG AA, 4.5:1): white on its orange buttons was 2.8:1,
# the selected tab's orange 2.8:1, slider ends, placeholders and hints in #bbbbc2 1.9:1, and box and
# check-box borders next to invisible on the dark theme.
THEME = gr.themes.Default().set(
    button_primary_background_fill="*primary_700", button_primary_background_fill_hover="*primary_800",
    button_primary_background_fill_dark="*primary_700", button_primary_background_fill_hover_dark="*primary_800",
    button_cancel_background_fill="#b91c1c", button_cancel_background_fill_hover="#dc2626",  # red 700, 600
    button_cancel_background_fill_dark="#b91c1c", button_cancel_background_fill_hover_dark="#dc2626",
    color_accent="*primary_700", body_text_color_subdued="*neutral_500", input_placeholder_color="*neutral_500",
    input_placeholder_color_dark="*neutral_400", checkbox_border_color="*neutral_500",
    checkbox_border_color_dark="*neutral_500", input_border_color_dark="*neutral_500")
CSS = stylesheet("studio.css") + stylesheet("compare.css") + stylesheet("classroom.css") + attention.HEAD_COUNT_CSS
LESSON = Path(__file__).resolve().parent / "links" / "lessons" / "attention-is-all-you-need.md"  # --lesson's default
# Where a newcomer begins among ten tabs: three steps, each a tab, from a translation to the model's insides.
START_HERE = ("**Start here:** ① *Translate* a sentence (or click an example) → ② *Attention* shows where each "
              "output word looked (section 3.2) → ③ *Train* a model live and watch the same maps form.")
# Presenter mode's plots: every figure's type and height times this (static/presenter.js).
PRESENTER_PLOT_SCALE = 1.4
PRESENTER_JS = script("presenter.js", SCALE=PRESENTER_PLOT_SCALE)
# Gradio 6.31's status tracker tells screen readers that a call ended with two words its English texts
# lack: without these, each translation or step was read out as "common.complete".
STATUS_WORDS = gr.I18n(en={"common.complete": "Done", "common.progress": "Progress"})


def page_js() -> str:
    """The scripts run once when the page loads (launch(js=...) takes one function)."""
    scripts = [script("clamp_numbers.js"), beam.STEP_KEYS_JS, script("page_plots.js", NARROW_PX=plots.NARROW_PX),
               script("accessible_names.js"), script("keep_focus.js"), script("bertviz_height.js"),
               script("downloads.js"), script("lesson_keys.js"), script("click_feedback.js"),
               script("open_in_place.js"), script("class_follow.js", PERIOD_MS=class_panel.FOLLOW_POLL_MS),
               script("class_lead.js")]
    # Marked once they have run: what a test (or any script driving the page) waits on before it clicks.
    ready = "document.documentElement.dataset.studioScripts = 'ready';"
    return "() => { " + " ".join(f"({function})();" for function in scripts) + f" {ready} }}"


def build_app(registry: ModelRegistry, selected: str | None = None, checkpoints_dir: Path | None = None,
              public: bool = False, lesson: Lesson | None = None, classroom: Classroom | None = None) -> gr.Blocks:
    """checkpoints_dir: where the Train tab saves (default: the repository's checkpoints/);
    public: visitors share the one training run, which is bounded and controlled only by its starter;
    lesson: the lesson the Lesson panel presents (none: no panel); classroom: its classes (none: no classes)."""
    selected = selected if selected in registry.names() else registry.default()
    # Uploaded files are copied by the callbacks that use them; Gradio's copies older than two
    # hours are deleted (checked hourly), so visitors' uploads cannot fill the disk over time.
    with gr.Blocks(title="Transformer Studio", analytics_enabled=False, delete_cache=(3600, 7200)) as demo:
        gr.Markdown("## Transformer Studio — “Attention Is All You Need”, opened up", elem_id="studio-title")
        # A class's box first, where a student's phone shows its question (the routes followers poll: main()'s).
        in_class = class_panel.build(class_panel.Room(classroom, lesson, registry)) if lesson and classroom else None
        gr.Markdown(START_HERE, elem_id="start-here")
        shell, status, presenter = _header(registry, selected, demo)
        link_row = _link_row()
        presented = (lesson, lesson_panel.build(lesson, in_class is not None)) if lesson else None
        if in_class is not None:
            class_panel.wire(demo, in_class, presented[1].start_class)
        upload = _upload_box()
        # One job for the whole process: every browser session sees (and controls) the same run.
        job = training.TrainingJob(registry, checkpoints_dir or CHECKPOINTS, public)
        linked = _tabs(shell, job, presenter)
        api.register(registry, job)  # /score, /attention, ..., /train_status: numbers as JSON
        presenter.change(None, inputs=presenter, js=PRESENTER_JS)
        _follow_the_picker(shell, status, upload, linked, link_row, presented)
    api.publish_only(demo)  # a script calls the endpoints of docs/api.md; the rest is the page's
    return demo


def _header(registry: ModelRegistry, selected: str | None, demo: gr.Blocks
            ) -> tuple[Shell, gr.Markdown, gr.Checkbox]:
    """The model picker, the picked model's status line and the presenter-mode switch, in one row."""
    with gr.Row(equal_height=True):
        picker = gr.Dropdown(choices=registry.choices(), value=selected, label="Model", scale=1,
                             allow_custom_value=False, elem_id="model-picker")
        status = gr.Markdown(status_line(registry, selected), elem_classes="status-line", elem_id="model-summary")
        with gr.Column(scale=0, min_width=240):  # a bare checkbox's box would take a third of the row
            presenter = gr.Checkbox(label="Presenter mode (large type, high contrast)", value=False,
                                    elem_id="presenter-switch", container=False)
    return Shell(registry, picker, demo, gr.State(registry.key(selected))), status, presenter


def _link_row() -> tuple[gr.Markdown, gr.Textbox, gr.Button]:
    """What a page's link said (a value clamped, a name unknown), and "Link to this view" with its address."""
    notices = gr.Markdown(elem_classes="announce", elem_id="link-notices")
    with gr.Row(equal_height=True):
        copy = gr.Button("Link to this view", size="sm", scale=0, min_width=170, elem_id="link-copy")
        address = gr.Textbox(label="Address of this view", show_label=False, container=False, scale=5,
                             interactive=False, buttons=["copy"],
                             placeholder="The address of what is on screen, to hand out: press the button",
                             elem_id="link-address")
    return notices, address, copy


def _upload_box() -> gr.File:
    """Folded: opening a checkpoint is done before a lecture (presenter mode hides it)."""
    with gr.Accordion("Open another checkpoint", open=False, elem_id="open-checkpoint"):
        upload = gr.File(label="A checkpoint: config.json, model.safetensors (or its shards and index) and "
                               f"tokenizer.json (or a .zip of the folder); at most {MAX_UPLOAD_MB} MB a file",
                         file_count="multiple")
    return upload


def _tabs(shell: Shell, job: training.TrainingJob, presenter: gr.Checkbox) -> deep_links.Linked:
    """One tab per topic. The Attention and Train tabs draw only while on screen: every tab says when it
    is shown (on_screen, this session's tab id). Returns what a deep link sets."""
    on_screen = gr.State("translate")
    with gr.Tabs(overflow_behavior="wrap") as tabs:  # every tab in sight on a phone too, not behind a "⋯" menu
        with gr.Tab("Translate", id="translate", elem_id="tab-translate") as translate_tab:
            translate_tab_parts = translate.build(shell)
            translated = translate_tab_parts.current
        with gr.Tab("What if", id=what_if.TAB_ID, elem_id="tab-what-if") as what_if_tab:
            what_if.build(shell, translated, what_if_tab, tabs, on_screen)
        with gr.Tab("Beam search", id="beam", elem_id="tab-beam") as beam_tab:
            searched = beam.build(shell, translated, beam_tab)
        with gr.Tab("Attention", id=attention.TAB_ID, elem_id="tab-attention") as attention_tab:
            attention_controls = attention.build(shell, translated, attention_tab, on_screen)
        with gr.Tab("Attention arithmetic", id=arithmetic.TAB_ID, elem_id="tab-arithmetic") as arithmetic_tab:
            arithmetic_controls = arithmetic.build(shell, translated, arithmetic_tab, on_screen)
        with gr.Tab("Saliency", id=saliency.TAB_ID, elem_id="tab-saliency") as saliency_tab:
            saliency.build(shell, translated, saliency_tab, on_screen)
        with gr.Tab("Knock out", id=knockout.TAB_ID, elem_id="tab-knockout") as knockout_tab:
            knocked = knockout.build(shell, knockout_tab, on_screen)
        with gr.Tab("Word choice", id=word_choice.TAB_ID, elem_id="tab-word-choice") as word_tab:
            chosen = word_choice.build(shell, word_tab, on_screen)
        with gr.Tab("Positional encoding", id="positional", elem_id="tab-positional") as positional_tab:
            positional.build(shell)
        with gr.Tab("Model", id="model", elem_id="tab-model") as model_tab:
            model_view.build(shell)
        with gr.Tab("Compare", id=compare.TAB_ID, elem_id="tab-compare") as compare_tab:
            compare.build(shell, compare_tab)
        with gr.Tab("Train", id=train_live.TAB_ID, elem_id="tab-train") as train_tab:
            train.build(shell, job, train_tab, on_screen)
    for other in (translate_tab, beam_tab, positional_tab, model_tab, compare_tab):
        other.select(partial(str, other.id), outputs=on_screen, show_progress="hidden")
    return deep_links.Linked(tabs, on_screen, presenter, translate_tab_parts, searched, attention_controls,
                             arithmetic_controls, {knockout.SLUG: knocked, word_choice.SLUG: chosen})


def _follow_the_picker(shell: Shell, status: gr.Markdown, upload: gr.File, linked: deep_links.Linked,
                       link_row: tuple[gr.Markdown, gr.Textbox, gr.Button],
                       presented: tuple[Lesson, lesson_panel.LessonPanel] | None) -> None:
    """The picked model's key and status line follow the picker; an upload adds a model and picks it;
    a page's load reads its link (links/deep_links.py), then offers the models as they are now."""
    registry, picker = shell.registry, shell.model
    # A trivial call, so no concurrency limit: the tabs redraw for the new model without waiting in line.
    picker.change(registry.key, inputs=picker, outputs=shell.model_key, concurrency_limit=None,
                  show_progress="hidden")
    shell.model_key.change(guard(partial(status_line, registry)), inputs=picker, outputs=status)
    upload.upload(guard(partial(open_checkpoint, registry)), inputs=[upload, picker], outputs=[picker, status],
                  api_name="open_checkpoint").then(
        lambda: None, outputs=upload, show_progress="hidden")  # emptied: the next upload starts afresh
    # Hidden progress: the page's first render already holds the picker and its line, which the load only brings up
    # to date; shown, the pending state greyed the model line for the seconds a first load takes (issue 51).
    offered = dict(fn=guard(partial(refresh, registry)), inputs=picker, outputs=[picker, status, shell.model_key],
                   show_progress="hidden")
    deep_links.wire(shell, linked, *link_row, after_load=[offered], lesson=presented)


# ----- command line --------------------------------------------------------------------------
def _int_in(low: int, high: int):
    """An argparse type: an integer in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studio", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 serves the network)")
    parser.add_argument("--port", type=_int_in(1, 65535), default=7860, help="TCP port (default 7860)")
    parser.add_argument("--checkpoint", type=Path, help="a checkpoint folder to open and select")
    parser.add_argument("--checkpoints-dir", type=Path, default=None,
                        help="folder whose subfolders are offered (default: the repository's checkpoints/)")
    parser.add_argument("--share", action="store_true", help="also serve through a public Gradio link")
    parser.add_argument("--public", action="store_true",
                        help=f"for strangers (a Space, --share): only the browser that starts a training run may "
                             f"pause, stop or save it; runs end after {PUBLIC_MAX_MINUTES:.0f} minutes; models up to "
                             f"{PUBLIC_MAX_PARAMETERS / 1e6:.0f}M parameters")
    parser.add_argument("--lesson", type=Path, default=LESSON,
                        help="a lesson to present (Markdown: a title, then steps with notes and a link; docs/studio.md "
                             "says how to write one); default: the shipped one, which walks the paper")
    parser.add_argument("--no-lesson", dest="lesson", action="store_const", const=None,
                        help="no Lesson panel (links still open their views)")
    parser.add_argument("--class", dest="start_class", action="store_true",
                        help="start a class of the lesson at once: prints the students' link and the lecturer's")
    parser.add_argument("--threads", type=_int_in(1, 1024), default=1,
                        help="torch CPU threads (default 1: one-sentence decoding is 2-10x slower with more "
                             "threads on a busy 2-core machine; concurrent users get a thread each)")
    parser.add_argument("--compiled", action="store_true",
                        help="decode a sentence that arrives alone through a compiled decoder step (torch.compile, "
                             "needs a C++ compiler): about 1.3x faster; the models compile in the background at "
                             "start (a minute on 2 cores; cached on disk for the next start)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sessions.limit_malloc_arenas()  # before the server's threads: forgotten sessions' memory goes back
    sessions.light_sessions()  # a session-less REST call no longer copies the configuration of 456 blocks
    remove_stale_copies()  # upload copies a crashed studio left in the temporary folder
    torch.set_num_threads(args.threads)
    registry = ModelRegistry(args.checkpoints_dir) if args.checkpoints_dir else ModelRegistry()
    selected = None
    if args.checkpoint:
        try:
            selected = registry.open(args.checkpoint)
        except (ValueError, FileNotFoundError) as exc:
            sys.exit(f"error: --checkpoint {args.checkpoint}: {exc}")
    try:
        lesson = read_lesson(args.lesson) if args.lesson else None
    except (ValueError, FileNotFoundError) as exc:
        sys.exit(f"error: --lesson {args.lesson}: {exc}")
    if args.start_class and lesson is None:
        sys.exit("error: --class follows a lesson; leave out --no-lesson")
    classroom = Classroom() if lesson else None
    demo = build_app(registry, selected, args.checkpoints_dir, args.public, lesson, classroom)
    if args.start_class:
        print(class_panel.started_here(classroom, lesson, args.host, args.port), flush=True)
    if args.compiled and compiled_models.COMPILED.warm(registry.get(name) for name in registry.names()) is None:
        print("--compiled: no C++ compiler (g++, c++ or clang++) found; decoding stays eager", file=sys.stderr)
    with demo:  # sessions idle or closed are forgotten: memory stays bounded however many come
        sessions.Forgetter(demo).start()
    try:
        demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=DEFAULT_CONCURRENCY, status_update_rate=1).launch(
            server_name=args.host, server_port=args.port, share=args.share, css=CSS, js=page_js(), theme=THEME,
            show_error=False, max_file_size=MAX_UPLOAD_BYTES, i18n=STATUS_WORDS,
            app_kwargs=class_panel.app_kwargs(classroom, lesson))
    except OSError as exc:  # the port is taken, or the host is not an address of this machine
        reason = str(exc).split(". ")[0]  # Gradio goes on about launch() parameters
        sys.exit(f"error: cannot serve on {args.host}:{args.port}: {reason}; choose another --port or --host")
