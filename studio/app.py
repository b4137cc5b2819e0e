"""The studio's shell: model picker, status line, presenter switch, one tab per topic.

    python -m studio [--host 127.0.0.1] [--port 7860] [--checkpoint PATH] [--share]

The Train tab adds the model it trains with ``ModelRegistry.add(name, bundle)`` and refreshes
the picker with ``picker_update(registry, name)``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402

from core.checkpoint import FILES as CHECKPOINT_FILES  # noqa: E402

from .registry import ModelRegistry, describe  # noqa: E402
from .text import guard, info, md, warn  # noqa: E402

CSS = """
.status-line p { margin: 0; }
body.presenter { --text-xs: 16px; --text-sm: 18px; --text-md: 21px; --text-lg: 24px; --text-xl: 28px;
  --text-xxl: 34px; --body-text-size: 21px; --block-label-text-size: 18px; --block-title-text-size: 20px;
  --input-text-size: 22px; --section-header-text-size: 22px; --prose-text-size: 21px;
  --body-text-color: #000; --body-text-color-subdued: #111; --block-label-text-color: #000;
  --block-title-text-color: #000; --input-text-color: #000; --color-accent: #0a3d91;
  --button-primary-background-fill: #0a3d91; --button-primary-text-color: #fff;
  --border-color-primary: #333; --block-border-width: 2px; --checkbox-label-text-size: 20px;
  --button-large-text-size: 22px; --button-medium-text-size: 20px; --button-small-text-size: 18px;
  --table-text-size: 20px; }
body.presenter .gradio-container { background: #fff; }
body.presenter .tab-wrapper button { font-size: 21px; font-weight: 700; color: #000; }
"""

MAX_UNZIPPED = 2**31  # bytes per file taken from an uploaded .zip
PRESENTER_JS = "(on) => { document.body.classList.toggle('presenter', on); }"


@dataclass
class Shell:
    """What every tab needs: the registry and the picked model's name (an input to callbacks)."""

    registry: ModelRegistry
    model: gr.Dropdown
    demo: gr.Blocks


def status_line(registry: ModelRegistry, name: str | None) -> str:
    if not registry.names():
        return ("**No model yet.** Put a checkpoint folder in `checkpoints/`, start with "
                "`--checkpoint PATH`, or open one below.")
    try:
        bundle = registry.get(name)
    except (LookupError, ValueError, FileNotFoundError) as exc:
        return f"**Model {md(name)} cannot be used:** {md(exc)}"
    facts = describe(bundle)
    return (f"**{md(name)}** · {facts['parameters']} parameters · vocabulary {facts['vocab']} · "
            f"{facts['layers']} · {facts['device']}")


def picker_update(registry: ModelRegistry, name: str | None) -> gr.Dropdown:
    return gr.Dropdown(choices=registry.names(), value=name)


def refresh(registry: ModelRegistry, name: str | None):
    """On page load: the picker's choices as they are now (a Train tab may have added some)."""
    return picker_update(registry, name), status_line(registry, name)


def open_checkpoint(registry: ModelRegistry, files: list[str] | None, current: str | None):
    """Uploaded checkpoint files (or one .zip of the folder) -> a new entry in the picker."""
    if not files:
        return picker_update(registry, current), status_line(registry, current)
    try:
        name = registry.open(_assemble(files))
    except (ValueError, FileNotFoundError) as exc:
        warn(f"That is not a checkpoint the studio can open: {exc}")
        return picker_update(registry, current), status_line(registry, current)
    info(f"Opened {name}.")
    return picker_update(registry, name), status_line(registry, name)


def _assemble(files: list[str]) -> Path:
    """Put uploaded files into one fresh folder (a single .zip is unpacked, flattened)."""
    import zipfile

    folder = Path(tempfile.mkdtemp(prefix="studio-upload-")) / "uploaded-checkpoint"
    folder.mkdir()
    if len(files) == 1 and zipfile.is_zipfile(files[0]):
        with zipfile.ZipFile(files[0]) as archive:
            for member in archive.infolist():
                base = member.filename.rsplit("/", 1)[-1]
                if base in CHECKPOINT_FILES and member.file_size <= MAX_UNZIPPED:
                    (folder / base).write_bytes(archive.read(member))
    else:
        for file in map(Path, files):
            (folder / file.name).write_bytes(file.read_bytes())
    return folder


def build_app(registry: ModelRegistry, selected: str | None = None, checkpoints_dir: Path | None = None) -> gr.Blocks:
    """checkpoints_dir: where the Train tab saves (default: the repository's checkpoints/)."""
    from .registry import CHECKPOINTS
    from .tabs import attention, beam, model_view, positional, train, translate
    from .training import TrainingJob

    names = registry.names()
    selected = selected if selected in names else (names[0] if names else None)
    with gr.Blocks(title="Transformer Studio", analytics_enabled=False) as demo:
        with gr.Row(equal_height=True):
            gr.Markdown("## Transformer Studio — *Attention Is All You Need*, opened up")
            presenter = gr.Checkbox(label="Presenter mode (large type, high contrast)", value=False,
                                    elem_id="presenter-switch", container=False, scale=0, min_width=300)
        with gr.Row(equal_height=True):
            picker = gr.Dropdown(choices=names, value=selected, label="Model", scale=1, allow_custom_value=False)
            status = gr.Markdown(status_line(registry, selected), elem_classes="status-line")
        shell = Shell(registry, picker, demo)
        with gr.Accordion("Open another checkpoint", open=False):
            upload = gr.File(label="A checkpoint: config.json, model.safetensors and tokenizer.json "
                                   "(or a .zip of the folder)", file_count="multiple")
        with gr.Tabs():
            with gr.Tab("Translate", id="translate", elem_id="tab-translate"):
                translated = translate.build(shell)
            with gr.Tab("Beam search", id="beam", elem_id="tab-beam"):
                beam.build(shell)
            with gr.Tab("Attention", id="attention", elem_id="tab-attention"):
                attention.build(shell, translated)
            with gr.Tab("Positional encoding", id="positional", elem_id="tab-positional"):
                positional.build()
            with gr.Tab("Model", id="model", elem_id="tab-model"):
                model_view.build(shell)
            with gr.Tab("Train", id="train", elem_id="tab-train"):
                # One job for the whole process: every browser session sees (and controls) the same run.
                train.build(shell, TrainingJob(registry, checkpoints_dir or CHECKPOINTS))
        presenter.change(None, inputs=presenter, js=PRESENTER_JS)
        picker.change(guard(partial(status_line, registry)), inputs=picker, outputs=status)
        upload.upload(guard(partial(open_checkpoint, registry)), inputs=[upload, picker], outputs=[picker, status])
        demo.load(guard(partial(refresh, registry)), inputs=picker, outputs=[picker, status])
    return demo


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m studio", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 serves the network)")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--checkpoint", type=Path, help="a checkpoint folder to open and select")
    parser.add_argument("--checkpoints-dir", type=Path, default=None,
                        help="folder whose subfolders are offered (default: the repository's checkpoints/)")
    parser.add_argument("--share", action="store_true", help="also serve through a public Gradio link")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: one-sentence decoding is 2-10x slower with more "
                             "threads on a busy 2-core machine; concurrent users get a thread each)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(max(1, args.threads))
    registry = ModelRegistry(args.checkpoints_dir) if args.checkpoints_dir else ModelRegistry()
    selected = None
    if args.checkpoint:
        try:
            selected = registry.open(args.checkpoint)
        except (ValueError, FileNotFoundError) as exc:
            sys.exit(f"error: --checkpoint {args.checkpoint}: {exc}")
    demo = build_app(registry, selected, args.checkpoints_dir)
    demo.queue().launch(server_name=args.host, server_port=args.port, share=args.share, css=CSS,
                        show_error=False)
