"""The Train tab's set-up panel (studio/train/form.py): a page opened during a run shows the run's set-up,
each bad box is named, the tasks' labels fit their box, the defaults and the learning-rate line, and the
model's name follows the data until the user types one."""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import gradio as gr
import pytest

from studio.train import form, sources, tab
from tests.helpers.jobs import QUICK, panel, wait_for


def test_a_page_opened_during_a_run_shows_the_runs_set_up(job):
    """A second page (or a reload) showed the defaults under the run's status line: task numbers,
    600 steps, d_model 64 beside 'lecture-demo, 2,000 steps'. It shows the run's, folded as after Start."""
    assert form.setup_of_the_run(job) == (gr.skip(),) * (len(form.FIELDS) + 1)  # no run: left as built
    ours = replace(QUICK, data="synthetic:copy", name="lecture-demo", layers=1, d_model=32, n_heads=2, d_ff=64,
                   dropout=0.0, limit=100, max_steps=3)
    job.start(ours)
    wait_for(job, lambda v: v.state == "finished")
    *values, setup = form.setup_of_the_run(job)
    assert form.settings_from(dict(zip(form.FIELDS, values))) == ours and setup.open is False
    assert values[:2] == [sources.SOURCES[0], "copy"]
    preset_sized = form.form_values(replace(ours, layers=None, d_ff=None))  # None: the preset's size
    sizes = form.preset_values(ours.preset)
    assert [preset_sized[form.FIELDS.index(f)] for f in ("layers", "d_ff")] == [sizes[0], sizes[3]]
    # Other sources: the typed path as the panel takes it, the dataset's name; an upload's box is left empty.
    shared = sources.ROOT.parent / "shared" / "data" / "tatoeba-deu-eng" / "deu-eng.tsv.gz"
    assert form.data_fields(f"files:{shared}:en-de")[:3] == (
        sources.SOURCES[1], "numbers", "../shared/data/tatoeba-deu-eng/deu-eng.tsv.gz:en-de")
    assert form.data_fields("hf:opus_books:de-en") == (sources.SOURCES[3], "numbers", "", None, "opus_books:de-en")
    upload = Path(tempfile.gettempdir()) / f"{sources.UPLOAD_COPY_PREFIX}x1" / "pairs.tsv"
    assert form.data_fields(f"files:{upload}")[:4] == (sources.SOURCES[2], "numbers", "", None)


def test_start_refusals_come_as_messages(job):
    assert tab.start(job, *panel(kind=sources.SOURCES[1], path="../../etc/passwd"))[0] == gr.skip()
    assert job.view().state == "idle"
    with pytest.raises(ValueError, match="steps must be a whole number"):
        form.settings_from(dict(zip(form.FIELDS, panel(max_steps=0))))
    with pytest.raises(ValueError, match="dropout"):
        form.settings_from(dict(zip(form.FIELDS, panel(dropout=None))))
    # The boxes have no Gradio bounds (its refusal names no box): these messages name each one.
    for field, bad, words in (("max_steps", -5, "steps must be a whole number of at least 1"),
                              ("d_model", 2.5, "d_model must be a whole number"),
                              ("dropout", 1.5, "dropout must be a number from 0 to 0.9"),
                              ("lr_factor", 0, "lr factor must be a number above 0"),
                              ("warmup", None, "warm-up steps must be a whole number of at least 1, got an empty box")):
        with pytest.raises(ValueError, match=words):
            form.settings_from(dict(zip(form.FIELDS, panel(**{field: bad}))))


def test_synthetic_tasks_have_labels_that_fit_their_box():
    from core.data.tasks import TASKS

    assert set(form.TASK_LABELS) == set(TASKS)  # "numbers: English number 0-999, as lower-case words (…" was cut
    assert all(len(f"{name}: {label}") <= 40 for name, label in form.TASK_LABELS.items())
    assert form.task_described("dates").info == TASKS["dates"].description  # the full description, under the box


def test_defaults_and_lr_line():
    settings = form.settings_from(dict(zip(form.FIELDS, panel(max_steps=form.DEFAULTS.max_steps))))
    assert settings == replace(form.DEFAULTS, limit=None, layers=2, d_model=64, n_heads=4, d_ff=256, dropout=0.0,
                               max_tokens=256, warmup=10, eval_every=10, attention_every=5)
    assert "6.25e-03" in form.peak_lr(64, 100, 0.5)
    assert all("must all be above 0" in form.peak_lr(*bad) for bad in ((64, 100, -1), (-64, 100, 1), (0, 100, 1)))
    assert form.peak_lr(None, 100, 1) == ""  # a box being typed into
    assert form.preset_values("small") == (3, 256, 4, 1024, 0.1)


def test_the_model_name_follows_the_data_until_the_user_types_one():
    synthetic, corpus, upload, hub = sources.SOURCES
    assert form.default_name(synthetic, "reverse", "", None, "") == "live-reverse"
    assert form.default_name(corpus, "numbers", "../shared/data/multi30k/", None, "") == "live-multi30k"
    assert form.default_name(corpus, "numbers", "tatoeba/deu-eng.tsv.gz:en-de", None, "") == "live-deu-eng"
    assert form.default_name(upload, "numbers", "", "/tmp/gradio/x/my pairs.tsv", "") == "live-my-pairs"
    assert form.default_name(hub, "numbers", "", None, "bentrevett/multi30k") == "live-multi30k"
    assert form.default_name(corpus, "numbers", "", None, "") == "live-model"
    assert form.data_picked(corpus, "numbers", "data/x", None, "", "live-numbers") == "live-x"
    assert form.data_picked(corpus, "numbers", "data/x", None, "", "  ") == "live-x"
    assert isinstance(form.data_picked(corpus, "numbers", "data/x", None, "", "my-lecture"), type(gr.skip()))
    # At Start too: a path pasted just before could reach it with the box still naming the last data.
    fields = dict(kind=corpus, task="numbers", path="tatoeba/deu-eng.tsv.gz:en-de", upload=None, hf_name="")
    assert form.run_name({**fields, "name": "live-multi30k"}) == "live-deu-eng"
    assert form.run_name({**fields, "name": " my-lecture "}) == "my-lecture"
