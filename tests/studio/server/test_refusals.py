"""Issue 67's smaller faults: refusals of an unknown name in one line and without a traceback in the log, a
bidirectional control dropped from an opened model's name, refusals that name no server path, upload copies
removed once read and a crashed studio's at start."""
from __future__ import annotations

import html
import logging
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import gradio as gr
import pytest

from core.checkpoint import save_checkpoint
from studio.server import limits, uploads
from studio.server.guard import guard
from studio.train.sources import ROOT, UPLOAD_COPY_PREFIX, corpus_path_spec
from tests.helpers.studio import SENTENCES
from tests.studio.server.test_abuse import TINY, answer, post, public  # noqa: F401 (public: the fixture)
from tests.helpers.studio import studio_bundle


@pytest.mark.parametrize("raised, said", [
    (LookupError("no model called 'nope'; available: studio-tiny"), "no model called 'nope'; available: studio-tiny"),
    (KeyError("nope"), "unknown name 'nope'"),
    (ValueError("unknown preset 'huge'; allowed presets: tiny, small"), "unknown preset 'huge'; allowed presets: "
                                                                         "tiny, small")])
def test_an_unknown_name_is_refused_in_one_line_without_a_traceback(raised, said, caplog):
    def callback():
        raise raised
    with caplog.at_level(logging.WARNING, logger="studio"), pytest.raises(gr.Error) as refused:
        guard(callback)()
    assert refused.value.message == said
    assert all(record.exc_info is None for record in caplog.records) and "refused" in caplog.text


def test_a_bidi_control_in_an_opened_models_name_is_dropped(registry, tmp_path):
    bundle = studio_bundle()
    folder = save_checkpoint(tmp_path / "up", replace(bundle, info={**bundle.info, "name": "evil\u202egnp.exe"}))
    name, new = registry.open_upload(folder, limits.MAX_UPLOADED_MODELS)
    assert new and name == "evilgnp.exe" and not limits.BIDI_CONTROLS.search("".join(registry.names()))


def test_a_corpus_path_refusal_names_no_server_folder():
    with pytest.raises(ValueError) as refused:
        corpus_path_spec("/etc")
    message = str(refused.value)
    assert str(ROOT) not in message and message.startswith("The studio reads corpora only from data or ")


def test_uploaded_files_are_removed_once_read(registry, tmp_path, monkeypatch, toasts):
    gradio_uploads = tmp_path / "gradio" / "0123"
    folder = save_checkpoint(gradio_uploads, studio_bundle())
    monkeypatch.setattr(uploads, "upload_root", lambda: (tmp_path / "gradio").resolve())
    elsewhere = save_checkpoint(tmp_path / "elsewhere", studio_bundle())
    uploads.open_checkpoint(registry, [str(p) for p in elsewhere.iterdir()], "studio-tiny")
    assert sorted(p.name for p in elsewhere.iterdir())  # not Gradio's: left alone
    uploads.open_checkpoint(registry, [str(p) for p in folder.iterdir()], "studio-tiny")
    assert list(folder.iterdir()) == []


def test_a_crashed_studios_upload_copies_are_removed_at_start():
    old = Path(tempfile.mkdtemp(prefix=uploads.COPY_PREFIX))
    older = Path(tempfile.mkdtemp(prefix=UPLOAD_COPY_PREFIX))
    fresh = Path(tempfile.mkdtemp(prefix=uploads.COPY_PREFIX))
    hours_ago = time.time() - 2 * limits.STALE_COPY_S
    for path in (old, older):
        os.utime(path, (hours_ago, hours_ago))
    try:
        removed = uploads.remove_stale_copies()
        assert {old, older} <= set(removed) and fresh not in removed
        assert not old.exists() and not older.exists() and fresh.is_dir()
    finally:
        fresh.rmdir()


@pytest.mark.parametrize("data, said", [
    ([TINY, SENTENCES[0], "magic", 4, 0.6, 10, 4, 1.0, 0, 1.0, "", "fp32"],
     "/translate: Value: 'magic' (type: <class 'str'>) is not in the list of choices: ['beam', 'greedy', 'sample']"),
    (["nope", SENTENCES[0], "beam", 4, 0.6, 10, 4, 1.0, 0, 1.0, "", "fp32"],
     "/translate: Value: nope is not in the list of choices")])
def test_a_value_outside_a_dropdowns_choices_is_refused_without_a_traceback(public, data, said, capsys):
    """Issue 67: an unknown model, method or preset sent through the API logged Gradio's full traceback."""
    event, error = answer(post(public, "translate", data))
    assert event == "error" and html.unescape(error["error"]).startswith(said) and "\n" not in error["error"]
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("api, data, said", [
    ("open_checkpoint", [SENTENCES[0], TINY], "/open_checkpoint: value 1 (A checkpoint: config.json, "),
    ("open_checkpoint", [[{"url": "http://127.0.0.1:9/config.json", "meta": {"_type": "gradio.FileData"}}], TINY],
     "/open_checkpoint: value 1 (A checkpoint: config.json, ")])
def test_a_file_that_is_not_one_is_refused_in_words(public, api, data, said, capsys):
    """Issue 67: a string where a file goes (pydantic's ValidationError), or a file's address Gradio cannot fetch,
    answered {"error": null} and logged a traceback."""
    event, error = answer(post(public, api, data))
    assert event == "error" and error["error"] and error["error"].startswith(said) and "\n" not in error["error"]
    assert "Traceback" not in capsys.readouterr().err
