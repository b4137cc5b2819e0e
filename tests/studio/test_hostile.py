"""Issue 10: hostile input — code-carrying checkpoints, path traversal, oversized uploads and
archives, 100k-character input, control characters and invalid UTF-8, HTML/JS in every input
(checked in the callbacks' outputs and once in headless Chromium), and a full queue.

Every "payload" here would create a marker file (or set window.__pwned) if it ran; the tests
first prove the payload is live, then that the studio never runs it.
"""
from __future__ import annotations

import functools
import gzip
import json
import os
import pickle
import random
import re
import runpy
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gradio as gr
import pytest
from tests.helpers.browser import CHROMIUM, launch_chromium
import torch
from tests.helpers.studio import SENTENCES, studio_bundle, studio_registry

from bench.serving import free_port
from core.bundle import ModelBundle
from core.checkpoint import load_checkpoint, load_trainer_state, loading, save_checkpoint
from core.data.tokenizer import Tokenizer
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio import app, components, shell
from studio.server import limits, uploads
from studio.server.registry import ModelRegistry
from studio.tabs import attention, beam, translate
from studio.train import job as training
from studio.train import live as train_live
from studio.train import saving, sources
from studio.train import setup as run_setup
from studio.train import tab as train_tab

ROOT = Path(__file__).resolve().parents[2]
MODEL = "studio-tiny"
# Whole-token payloads (no spaces: a word vocabulary keeps each one a single token).
PAYLOADS = ["<script>window.__pwned=1</script>", "<img/src=x/onerror=window.__pwned=1>",
            "</script><script>window.__pwned=1</script>", "<svg/onload=window.__pwned=1>",
            '"><iframe/onload=window.__pwned=1>']
HOSTILE_TEXT = " ".join(PAYLOADS)


class Payload:
    """Unpickling this opens (creates) the marker file: arbitrary code, as harmless as it gets."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def live_payload(tmp_path: Path) -> bytes:
    """A pickle that really runs code when loaded (checked on a separate marker)."""
    proof = tmp_path / "proof-the-payload-runs"
    pickle.loads(pickle.dumps(Payload(proof))).close()
    assert proof.exists()
    return pickle.dumps(Payload(tmp_path / "PWNED"))


def translate_text(registry, text: str, name: str = MODEL, **changes):
    o = dict(method="beam", beam_size=4, alpha=0.6, max_extra=10, n_best=3, temperature=1.0, top_k=0, top_p=1.0,
             seed=None) | changes
    return translate.translate(registry, name, text, *o.values())


@pytest.fixture
def registry():
    return studio_registry()


@pytest.fixture
def shipped(tmp_path) -> Path:
    return save_checkpoint(tmp_path / "shipped", studio_bundle())


# ----- code in checkpoints -------------------------------------------------------------------
def test_trainer_pt_carrying_code_is_refused_and_never_runs(tmp_path, shipped):
    payload = live_payload(tmp_path)
    # A bare pickle, and torch.save's zip and old formats around the same object.
    for body in (payload, "zip", "old"):
        if isinstance(body, bytes):
            (shipped / "trainer.pt").write_bytes(body)
        else:
            torch.save({"step": 1, "optimizer": Payload(tmp_path / "PWNED")}, shipped / "trainer.pt",
                       _use_new_zipfile_serialization=body == "zip")
        with pytest.raises(ValueError, match="refused to load: it holds objects other than tensors"):
            load_trainer_state(shipped)
    assert not (tmp_path / "PWNED").exists()


def test_a_truncated_or_garbled_trainer_state_is_called_damaged(shipped):
    torch.save({"step": 1, "weights": torch.zeros(1000)}, shipped / "trainer.pt")
    whole = (shipped / "trainer.pt").read_bytes()
    plain = pickle.dumps({"step": 1, "lr": [0.5] * 100})
    garbage = bytes(random.Random(0).randrange(256) for _ in range(300))
    for body in (whole[:len(whole) // 2], whole[:10], plain[:len(plain) // 2], garbage):
        (shipped / "trainer.pt").write_bytes(body)
        with pytest.raises(ValueError, match="trainer.pt is damaged or truncated"):
            load_trainer_state(shipped)


def test_model_safetensors_that_is_a_pickle_is_refused(tmp_path, shipped, registry, toasts):
    (shipped / "model.safetensors").write_bytes(live_payload(tmp_path))
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_checkpoint(shipped)
    torch.save({"w": Payload(tmp_path / "PWNED")}, shipped / "model.safetensors")  # torch's zip pickle
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_checkpoint(shipped)
    picker, status = uploads.open_checkpoint(registry, [str(p) for p in shipped.iterdir()], MODEL)
    assert registry.names() == [MODEL] and "model.safetensors: not a readable safetensors file" in toasts[-1]
    assert not (tmp_path / "PWNED").exists()


def test_uploads_kept_in_memory_are_capped_and_their_names_bounded(shipped, registry, toasts):
    # The name comes from the uploaded config.json: cut to 64 characters, control characters out.
    config = json.loads((shipped / "config.json").read_text())
    (shipped / "config.json").write_text(json.dumps(config | {"name": "\x00" + "x" * 500}))
    from safetensors.torch import load_file, save_file

    state = load_file(str(shipped / "model.safetensors"))
    first = sorted(state)[0]
    for n in range(limits.MAX_UPLOADED_MODELS + 1):  # other weights each time: the same ones are not doubled
        state[first].view(-1)[0] = n
        save_file(state, str(shipped / "model.safetensors"), metadata={"format": "pt"})
        uploads.open_checkpoint(registry, [str(p) for p in shipped.iterdir()], MODEL)
    base = "x" * (limits.MAX_NAME_CHARS - 1)  # the NUL became a space, stripped
    kept = [f"{base} ({n})" for n in range(2, limits.MAX_UPLOADED_MODELS + 2)]  # the first upload was dropped
    assert registry.names() == [MODEL] + kept and registry.uploaded == kept


def test_weights_holding_nan_and_unknown_devices_are_refused_by_name(shipped):
    from safetensors.torch import load_file, save_file

    state = load_file(str(shipped / "model.safetensors"))
    name = sorted(state)[0]
    state[name].view(-1)[0] = float("nan")  # what a diverged run saves
    save_file(state, str(shipped / "model.safetensors"))
    with pytest.raises(ValueError, match=f"NaN or infinite values \\({re.escape(name)}\\).*diverged"):
        load_checkpoint(shipped)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        load_checkpoint(shipped, "tpu")


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_zips_with_code_carrying_files_are_refused_or_ignored(tmp_path, shipped, registry, toasts):
    payload = live_payload(tmp_path)
    good = {p.name: p.read_bytes() for p in shipped.iterdir()}
    bad = _zip(tmp_path / "bad.zip", {**good, "model.safetensors": payload})
    uploads.open_checkpoint(registry, [str(bad)], MODEL)
    assert registry.names() == [MODEL] and "not a readable safetensors file" in toasts[-1]
    # A real checkpoint with a poisoned trainer.pt and a stray pickle: opened, the extras never read.
    extras = _zip(tmp_path / "extras.zip", {**good, "trainer.pt": payload, "evil.pkl": payload})
    folder = uploads._assemble([str(extras)])
    assert set(p.name for p in folder.iterdir()) == set(good)
    shutil.rmtree(folder.parent)
    picker, _ = uploads.open_checkpoint(registry, [str(extras)], MODEL)
    assert picker.value == MODEL and registry.names() == [MODEL]  # read, and found to be the model offered
    assert not (tmp_path / "PWNED").exists()


def test_zip_slip_member_names_cannot_write_outside_the_upload_folder(tmp_path, shipped, monkeypatch):
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    monkeypatch.setattr(uploads.tempfile, "mkdtemp", lambda prefix="": str(deep))
    good = {p.name: p.read_bytes() for p in shipped.iterdir()}
    archive = _zip(tmp_path / "slip.zip", {
        "../../../x/config.json": good["config.json"], "/abs/model.safetensors": good["model.safetensors"],
        "..\\..\\tokenizer.json": good["tokenizer.json"], "ok/../../evil.py": b"import os", "../../../y": b"y"})
    folder = uploads._assemble([str(archive)])
    assert folder.parent == deep and sorted(p.name for p in folder.iterdir()) == sorted(good)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted([f"a/b/c/uploaded-checkpoint/{n}" for n in good] +
                             [f"shipped/{n}" for n in good] + ["slip.zip"])
    assert load_checkpoint(folder).model.num_parameters() == studio_bundle().model.num_parameters()


def test_a_config_asking_for_a_huge_model_is_refused_before_allocating(shipped, monkeypatch):
    def build(config):  # refused from the headers: no model is ever built
        raise AssertionError(f"a {config.d_model}-wide model was allocated")

    monkeypatch.setattr(loading, "Transformer", build)
    config = json.loads((shipped / "config.json").read_text())
    for change in ({"d_model": 65536, "n_heads": 8, "d_ff": 262144, "encoder_layers": 64, "decoder_layers": 64},
                   {"max_len": 10**9}):
        (shipped / "config.json").write_text(json.dumps({**config, "model": {**config["model"], **change}}))
        with pytest.raises(ValueError, match="does not match config.json|max_len"):
            load_checkpoint(shipped)


# ----- paths taken from the UI ---------------------------------------------------------------
def test_corpus_paths_cannot_leave_the_data_folders(tmp_path):
    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "escape").symlink_to("/etc")
    (data / "passwd.tsv").symlink_to("/etc/passwd")
    roots = (data,)
    for bad in ("../../etc/passwd", "/etc/passwd", "~/.ssh/id_rsa", str(data / "escape" / "passwd"),
                str(data / "passwd.tsv"), f"{data}/corpus,/etc/passwd",  # files:A,B would read B
                f"{data}/../../etc/passwd:en-de", f"{data}/corpus/\x00x", "file:///etc/passwd"):
        with pytest.raises(ValueError):
            sources.corpus_path_spec(bad, roots)


def test_hugging_face_names_cannot_name_local_folders(monkeypatch):
    monkeypatch.chdir(ROOT)  # datasets.load_dataset reads local folders relative to here
    for bad in (".", "..", "/etc", "../../etc", "checkpoints/numbers-en-de-tiny", "studio", "~/x", "a/b/c",
                "../shared/data/multi30k", "name:../../x", "a" * 300):
        with pytest.raises(ValueError, match="not a Hugging Face dataset id"):
            sources.hf_dataset_name(bad)
    for good in ("bentrevett/multi30k", "opus_books:de-en", "Helsinki-NLP/opus-100:en-es", " wmt14 "):
        assert sources.hf_dataset_name(good) == good.strip()


def test_uploaded_tsv_must_be_an_upload(tmp_path):
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "link.tsv").symlink_to("/etc/passwd")
    for bad in ("/etc/passwd", str(uploads / "link.tsv"), str(uploads / ".." / ".." / "etc" / "passwd")):
        with pytest.raises(ValueError, match="not uploaded through the studio"):
            sources.uploaded_tsv_spec(bad, uploads)


def test_names_from_the_ui_cannot_reach_files(registry, tmp_path, toasts):
    for name in ("../../etc/passwd", "/etc/passwd", str(ROOT / "checkpoints" / "numbers-en-de-tiny")):
        assert "cannot be used" in shell.status_line(registry, name)
        assert "Cannot translate" in translate_text(registry, "Hund", name=name)[3]
    for name, safe in (("../../x", "x"), ("/etc/passwd", "etc-passwd"), (".hidden", "hidden"), ("a\x00b", "a-b"),
                       ("..", "live-model"), ("my run/../x", "my-run-.-x"), ("<script>", "script"), ("Übung", "Übung"),
                       ("Ünïcödé 🙂 name", "Ünïcödé-name"), ("   ", "live-model"), ("हिन्दी", "हिन्दी"),
                       ("مُعَلِّم", "مُعَلِّم"), ("می\u200cخواهم", "می\u200cخواهم")):
        assert saving.safe_name(name) == safe
    long = saving.safe_name("𝐁" * 64)  # 4 bytes a letter: cut to what a file name can hold
    assert len(long.encode()) <= 120 and long == "𝐁" * 30


# ----- size limits ---------------------------------------------------------------------------
def test_launch_sets_the_upload_limit_and_the_queue(monkeypatch, tmp_path):
    seen = {}
    def queue(self, **kwargs):
        seen["queue"] = kwargs
        return self

    monkeypatch.setattr(gr.Blocks, "queue", queue)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: seen.setdefault("launch", kwargs))
    app.main(["--checkpoints-dir", str(tmp_path)])
    assert seen["launch"]["max_file_size"] == limits.MAX_UPLOAD_BYTES
    assert seen["queue"]["max_size"] == limits.QUEUE_SIZE
    assert seen["queue"]["default_concurrency_limit"] == limits.DEFAULT_CONCURRENCY


def test_public_reaches_the_train_tabs_job_and_a_space_serves_public(monkeypatch, tmp_path):
    """--public bounds runs and lets only their starter control them: dropped on its way to the job, the
    Space's limits would vanish without a test failing."""
    made = []

    class Recorded(training.TrainingJob):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(training, "TrainingJob", Recorded)  # build_app imports it when called
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: None)
    app.main(["--checkpoints-dir", str(tmp_path)])
    app.main(["--public", "--checkpoints-dir", str(tmp_path)])
    assert [job.public for job in made] == [False, True]
    seen = []
    monkeypatch.setattr(app, "main", seen.append)
    monkeypatch.setattr(sys, "argv", ["app.py"])
    for space in ("", "someone/transformer-studio"):
        monkeypatch.setenv("SPACE_ID", space)
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    assert seen == [[], ["--host", "0.0.0.0", "--port", "7860", "--public"]]


def test_oversized_uploads_are_refused_with_a_message(tmp_path, shipped, registry, toasts, monkeypatch):
    monkeypatch.setattr(limits, "MAX_UPLOAD_BYTES", 4096)
    scratch = tmp_path / "scratch"
    monkeypatch.setattr(uploads.tempfile, "mkdtemp", lambda prefix="": str(scratch.mkdir() or scratch))
    uploads.open_checkpoint(registry, [str(p) for p in shipped.iterdir()], MODEL)
    assert "the studio accepts files of at most" in toasts[-1] and registry.names() == [MODEL]
    bomb = _zip(tmp_path / "bomb.zip", {"model.safetensors": b"\0" * 2**20})  # 1 MiB unpacked, ~1 KiB packed
    assert bomb.stat().st_size < 4096
    uploads.open_checkpoint(registry, [str(bomb)], MODEL)
    assert "model.safetensors in the .zip (unpacked)" in toasts[-1]
    assert not scratch.exists()  # the refused upload's copy is gone


def test_a_gzip_bomb_tsv_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_UPLOAD_BYTES", 2**20)
    scratch = tmp_path / "scratch"
    monkeypatch.setattr(sources.tempfile, "mkdtemp", lambda prefix="": str(scratch.mkdir() or scratch))
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "pairs.tsv.gz").write_bytes(gzip.compress(b"eins\tone\n" * 2**18))  # 2.3 MiB unpacked
    with pytest.raises(ValueError, match=r"uploaded TSV \(unpacked\) is .* at most"):
        sources.uploaded_tsv_spec(str(uploads / "pairs.tsv.gz"), uploads)
    (uploads / "broken.gz").write_bytes(b"\x1f\x8b" + b"not gzip")
    with pytest.raises(ValueError, match="not a valid gzip file"):
        sources.uploaded_tsv_spec(str(uploads / "broken.gz"), uploads)
    assert not scratch.exists()


# ----- text ----------------------------------------------------------------------------------
def test_100k_characters_get_a_notice_in_bounded_time(registry, toasts):
    for text in ("Hund " * 20_000, "x" * 100_000, "\U0001F415" * 100_000):  # bounded: cut before any work
        translation, _, _, notes, current = translate_text(registry, text)
        assert "input cut to its first 2,000 characters \\(it had 100,000\\)" in notes  # Markdown-escaped
        assert len(notes) < 3000 and len(current.source) == 2000
    search = beam.start(registry, MODEL, "Hund " * 20_000, 4, 0.6, "gnmt", 10)
    assert len(search.key[1]) == 2000 and any("input cut" in n for n in search.notices)
    assert attention.translate_here(registry, MODEL, "x" * 100_000)[0].source == "x" * 2000


def test_control_characters_and_lone_surrogates_are_cleaned(registry, toasts):
    text = "Ein\x00 Hund\x1b[31m rennt\x7f \ud800durch\udfff den\u0085 Schnee\x08 ."
    translation, _, _, notes, current = translate_text(registry, text)
    assert "5 control characters replaced by spaces" in notes and "2 invalid characters" in notes
    assert current.ids and "\x00" not in current.source and "\ud800" not in current.source
    current.source.encode("utf-8")  # valid UTF-8 from here on
    assert beam.start(registry, MODEL, text, 4, 0.6, "gnmt", 10) is not None
    assert attention.translate_here(registry, MODEL, text)[0].ids
    assert limits.clean_input("tab\tnew\nline\r ok") == ("tab\tnew\nline\r ok", [])


@pytest.fixture
def job(tmp_path, monkeypatch):
    monkeypatch.setattr(run_setup, "EVAL_SENTENCES", 5)
    job = training.TrainingJob(ModelRegistry(None), tmp_path / "checkpoints")
    yield job
    if job.view().state in ("running", "paused"):
        job.stop()
    job.wait(60)


def panel(upload: str) -> list:
    """The Train tab's set-up panel: an uploaded TSV, a two-step run."""
    values = dict(kind=sources.SOURCES[2], task="numbers", path="", upload=upload, hf_name="", src_lang="",
                  tgt_lang="", limit=0, name="tsv <b>run</b>", preset="tiny", layers=1, d_model=32, n_heads=2,
                  d_ff=64, dropout=0.0, vocab_size=64, max_steps=2, warmup=1, lr_factor=0.5, label_smoothing=0.1,
                  max_tokens=256, clip_norm=0, eval_every=100, attention_every=1, positional="sinusoidal",
                  separate_vocab=False, schedule="noam", peak_lr=1e-3, keep_best="off", patience=0)
    return [values[f] for f in train_tab.FIELDS]


def test_uploaded_tsv_with_invalid_utf8_or_control_characters(job, tmp_path, toasts, monkeypatch):
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    monkeypatch.setattr(sources, "upload_root", lambda: uploads)
    (uploads / "latin1.tsv").write_bytes("eins\tone\nzwei\ttwo\n".encode() + "Grüße\tgreetings\n".encode("latin-1"))
    said = train_tab.start(job, *panel(str(uploads / "latin1.tsv")))[1]
    assert "latin1\\.tsv line 3: invalid UTF\\-8 \\(byte 0xfc\\)" in said and job.view().state == "idle"
    rows = "".join(f"{n}\x00 {n + 1}\x1b[0m\t{n + 1}\x07 {n}\n" for n in range(40))
    (uploads / "control.tsv").write_text(rows, encoding="utf-8")
    train_tab.start(job, *panel(str(uploads / "control.tsv")))
    assert job.wait(120) and job.view().state == "finished"  # control characters are just data
    assert "&lt;b&gt;" in train_live.status(job.view())  # the typed name stays text


# ----- HTML and JavaScript in inputs: the callbacks' outputs -----------------------------------
@functools.lru_cache(maxsize=None)
def hostile_bundle() -> ModelBundle:
    """A model whose vocabulary holds the payloads, so they reach tokens, plots and bertviz."""
    tokenizer = Tokenizer.train(SENTENCES + [HOSTILE_TEXT], vocab_size=64, kind="word", min_frequency=1)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size,
                                         tgt_vocab_size=tokenizer.vocab_size, max_len=24)
        model = Transformer(config).eval()
    return ModelBundle(model, tokenizer, info={"name": PAYLOADS[1], "examples": [HOSTILE_TEXT]})


def hostile_registry() -> ModelRegistry:
    registry = ModelRegistry(None)
    registry.add(PAYLOADS[1], hostile_bundle())
    return registry


def strings(value) -> list[str]:
    """Every string inside a callback's output (figures through their plotly JSON)."""
    if isinstance(value, str):
        return [value]
    if hasattr(value, "to_plotly_json"):
        value = value.to_plotly_json()
    if getattr(value, "type", None) == "plotly" and isinstance(getattr(value, "plot", None), str):
        value = json.loads(value.plot)  # a figure sent as JSON (gr.Plot's PlotData): its strings, unescaped
    if isinstance(value, dict):
        return [s for v in [*value.keys(), *value.values()] for s in strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    if hasattr(value, "__dict__"):
        return strings(vars(value))
    return []


def assert_inert(*outputs) -> None:
    for text in strings(outputs):
        for payload in PAYLOADS:
            assert payload not in text, f"raw payload {payload!r} in output {text[:200]!r}"


def test_html_in_inputs_stays_text_in_every_callback_output(toasts):
    registry = hostile_registry()
    name = PAYLOADS[1]
    assert_inert(shell.status_line(registry, name))
    translation, fig, table, notes, current = translate_text(registry, HOSTILE_TEXT + " Ein Hund", name=name)
    assert current.ids and "unknown" not in notes  # every payload is a known token
    assert_inert(fig, notes, table)  # the translation box is plain text, not markup; the n-best table is escaped
    analysis, header, *_ = attention.show(registry, current)
    assert PAYLOADS[0] in analysis.src_tokens  # the payload really is a token here
    assert_inert(header, *attention.figures(analysis, "Cross-attention (decoder → encoder)", False, 1, 1),
                 *attention.bertviz_views(analysis))
    heads = attention.head_choices(registry, name)[2].choices
    assert_inert(attention.ablate(registry, current, name, [], [], [heads[0][0]]))
    search = beam.act("run", registry, None, name, HOSTILE_TEXT, 4, 0.6, "gnmt", 10)
    shown = list(beam.render(registry, search))
    del shown[5:7]  # the two results' boxes: plain text (Textbox values), not markup, as the translation box
    assert_inert([o for o in shown if isinstance(o, str) or hasattr(o, "to_plotly_json")])
    assert_inert(uploads.open_checkpoint(registry, None, name)[1], toasts)


def test_bertviz_keeps_script_closing_tokens_inside_its_script():
    analysis = attention.analyse(hostile_bundle(), "m", HOSTILE_TEXT, [5, 6])
    head_view, _ = attention.bertviz_views(analysis)
    page = head_view.split('srcdoc="', 1)[1]
    assert 'sandbox="allow-scripts"' in head_view and "allow-same-origin" not in head_view
    unescaped = __import__("html").unescape(page)
    assert "</script><script>window.__pwned" not in unescaped  # written <\/script> inside bertviz's JSON


# ----- through HTTP: Gradio's own routes -------------------------------------------------------
def _launch(demo: gr.Blocks, **queue) -> str:
    port = free_port()
    demo.queue(**queue).launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                               max_file_size=4096)
    return f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def served():
    registry = studio_registry()
    demo = app.build_app(registry, MODEL, Path(os.environ.get("TMPDIR", "/tmp")) / "unused-checkpoints")
    url = _launch(demo, max_size=limits.QUEUE_SIZE, default_concurrency_limit=limits.DEFAULT_CONCURRENCY)
    yield url, registry
    demo.close()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _call(url: str, api: str, data: list) -> tuple[str, str]:
    """POST /gradio_api/call/API, then read its event stream: (event, data) of the result."""
    request = urllib.request.Request(f"{url}gradio_api/call/{api}", json.dumps({"data": data}).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        event_id = json.load(r)["event_id"]
    status, body = _get(f"{url}gradio_api/call/{api}/{event_id}")
    lines = body.decode().splitlines()
    events = [(lines[i][6:].strip(), lines[i + 1][5:].strip()) for i in range(len(lines) - 1)
              if lines[i].startswith("event:") and lines[i + 1].startswith("data:")]
    return events[-1]


def test_gradio_serves_no_file_outside_its_uploads(served):
    url, _ = served
    for path in ("/etc/passwd", str(ROOT / "studio" / "app.py"), str(ROOT / "checkpoints"), "../../etc/passwd"):
        status, body = _get(f"{url}gradio_api/file={path}")
        assert status >= 400 and b"root:" not in body and b"import" not in body, (path, status)


def test_a_server_path_passed_as_an_upload_is_refused(served):
    url, registry = served
    event, data = _call(url, "translate", [MODEL, SENTENCES[0], "greedy", 1, 0.6, 5, 1, 1.0, 0, 1.0, None, "fp32"])
    assert event == "complete"  # the API path works...
    event, data = _call(url, "open_checkpoint", [[{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}],
                                                 MODEL])
    assert event == "error" and registry.names() == [MODEL]  # ...but a server path is no upload


def test_uploads_over_max_file_size_are_refused_by_gradio(served):
    url, _ = served
    boundary = "studio-test"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"model.safetensors\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n")
    body = head.encode() + b"\0" * 8192 + f"\r\n--{boundary}--\r\n".encode()  # twice the test's limit
    request = urllib.request.Request(f"{url}gradio_api/upload", body,
                                     {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 413 and b"File size exceeded maximum allowed size of 4096 bytes" in caught.value.read()


def test_a_full_queue_answers_busy_at_once(monkeypatch):
    """Beyond QUEUE_SIZE waiting events Gradio refuses with 503 "Queue is full" (the browser shows
    "This application is currently busy. Please try again.") instead of piling up work."""
    original = translate.translate
    release = threading.Event()  # no translation ends before every request is in: on a loaded machine the
    # requests arrived so slowly that the queue, draining at 0.5 s a request, never filled (all 200)

    def slow(*args, **kwargs):
        release.wait(timeout=60)
        return original(*args, **kwargs)

    monkeypatch.setattr(translate, "translate", slow)
    demo = app.build_app(studio_registry(), MODEL)
    url = _launch(demo, max_size=2, default_concurrency_limit=1)
    try:
        data = [MODEL, SENTENCES[0], "greedy", 1, 0.6, 5, 1, 1.0, 0, 1.0, None, "fp32"]

        def post(_) -> int:
            request = urllib.request.Request(f"{url}gradio_api/call/translate", json.dumps({"data": data}).encode(),
                                             {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as r:
                    return r.status
            except urllib.error.HTTPError as exc:
                assert b"Queue is full" in exc.read()
                return exc.code

        # /translate runs BATCHED's concurrency_limit at once (they leave the queue), then 2 wait: more are refused
        n = limits.BATCHED["concurrency_limit"] + 2 + 4
        with ThreadPoolExecutor(n) as pool:
            codes = list(pool.map(post, range(n)))  # /call/ answers once the request is queued, or refused
        assert codes.count(503) >= 1 and codes.count(200) >= 2, codes
    finally:
        release.set()
        demo.close()


# ----- HTML and JavaScript in the browser ------------------------------------------------------
@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")
def test_html_and_script_input_runs_nothing_in_the_browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    demo = app.build_app(hostile_registry(), PAYLOADS[1])
    url = _launch(demo, max_size=limits.QUEUE_SIZE)
    flags, failure = [], None
    try:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("dialog", lambda d: (flags.append(f"dialog: {d.message}"), d.dismiss()))
            try:
                _drive(page, url)
            except Exception as exc:  # a payload that ran is reported before a page that did not render
                failure = exc
            for frame in page.frames:  # the page and every iframe, bertviz's sandboxed ones included
                if frame.evaluate("() => window.__pwned !== undefined"):
                    flags.append(f"window.__pwned set in {frame.url[:80]}")
            if page.locator("img[src='x']").count():
                flags.append("an <img src=x> element was created")
            browser.close()
    finally:
        demo.close()
    assert not flags, flags
    if failure is not None:
        raise failure


def _drive(page, url: str) -> None:
    """The payloads everywhere they travel: model name (picker, status line), Translate, Attention
    (plots and bertviz's iframes), What if, Attention arithmetic, Saliency (and a download), Beam search."""
    page.goto(url)
    page.locator(".status-line").get_by_text("onerror").first.wait_for(timeout=30000)  # the name, as text
    page.get_by_label("Source sentence").fill(HOSTILE_TEXT + " Ein Hund")
    page.get_by_role("button", name="Translate", exact=True).click()
    page.locator("#tab-translate .js-plotly-plot .bars").first.wait_for(timeout=30000)
    page.get_by_role("tab", name="Attention", exact=True).click()
    page.get_by_text("bertviz: head view and model view").click()
    page.frame_locator("iframe.bertviz").first.locator("svg text").first.wait_for(timeout=30000)
    # The explaining tabs show the pair as tokens, tables and plots, and a download reads a plot's labels.
    page.get_by_role("tab", name="What if").click()
    page.locator("#what-if-tokens .token-chip").first.wait_for(timeout=30000)
    page.get_by_role("tab", name="Attention arithmetic").click()
    page.locator("#arithmetic-steps table").wait_for(timeout=30000)
    page.get_by_role("tab", name="Saliency").click()
    page.locator("#saliency-agreement").get_by_text("Agreement").wait_for(timeout=30000)
    page.evaluate(components.script("downloads.js"))  # a page script, which this test's launch does not give
    page.locator("#tab-saliency .studio-download summary").first.click()
    with page.expect_download():
        page.locator("#tab-saliency .studio-download-menu button", has_text="JSON").first.click()
    page.get_by_role("tab", name="Beam search").click()
    page.get_by_label("Sentence to search").fill(HOSTILE_TEXT)
    page.get_by_role("button", name="Run to end").click()
    page.locator("#tab-beam").get_by_text(re.compile("(Same result|Different)")).wait_for(timeout=30000)
    page.wait_for_timeout(500)


def test_uploads_opened_at_once_under_one_name_each_get_their_own(shipped, registry, tmp_path, monkeypatch):
    """The free name was picked, then taken, without a lock: the second of two uploads named alike
    replaced the first in the picker."""
    add = registry.add  # widened, the window between finding a name free and taking it
    monkeypatch.setattr(registry, "add", lambda *args, **kwargs: time.sleep(0.05) or add(*args, **kwargs))
    from safetensors.torch import load_file, save_file

    folders = []
    for n in range(4):  # the same name in config.json, other weights
        folder = tmp_path / f"upload-{n}"
        shutil.copytree(shipped, folder)
        state = load_file(str(folder / "model.safetensors"))
        state[sorted(state)[0]].view(-1)[0] = n
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        folders.append(folder)
    opened = []
    threads = [threading.Thread(target=lambda f=f: opened.append(registry.open_upload(f, 10))) for f in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    names = [name for name, new in opened]
    assert len(set(names)) == 4 and all(new for _, new in opened) and sorted(registry.uploaded) == sorted(names)
