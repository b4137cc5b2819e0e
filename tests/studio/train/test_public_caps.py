"""Issue 67's training holes on a public studio: a run's shape capped by what its step costs (not its parameter
count), and an uploaded TSV capped in size, lines and longest line while it is copied, before core or BPE read
it."""
from __future__ import annotations

import gzip
import resource
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.checkpoint import save_checkpoint
from studio.server import limits
from studio.server.registry import ModelRegistry
from studio.train import sources
from studio.train.job import Settings, TrainingJob
from studio.train.setup import check_size
from tests.helpers.jobs import QUICK, wait_for
from tests.helpers.studio import studio_bundle


def test_the_real_corpus_caps():
    assert (limits.PUBLIC_MAX_CORPUS_LINES, limits.PUBLIC_MAX_CORPUS_MB, limits.PUBLIC_MAX_LINE_BYTES) == (
        100_000, 10, 2_000)


@pytest.mark.parametrize("settings, refusal", [
    (Settings(preset="tiny", layers=6000, d_model=2, n_heads=1, d_ff=8),
     "this public studio takes models of at most 12 layers a stack, and this one has 6,000"),
    (Settings(preset="small", max_tokens=100_000),
     "one step of this model on 100,000 tokens would take ~54 CPU-seconds; this public studio takes models whose "
     "step costs at most 3 s")])
def test_a_public_run_is_refused_by_its_step_cost_before_anything_is_read(registry, tmp_path, settings, refusal):
    """The 6,000-layer d_model-2 model has 0.3M parameters, under the 10M cap, and took 27 s a step."""
    job = TrainingJob(registry, tmp_path / "checkpoints", public=True)
    started = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        job.start(settings)
    assert str(refused.value).startswith(f"Cannot start: {refusal}")
    assert time.perf_counter() - started < 2 and job.view().state != "preparing"
    check_size(settings, public=False)  # a private studio has no such cap


@pytest.fixture
def uploads(tmp_path):
    folder = tmp_path / "gradio"
    folder.mkdir()
    return folder


def _spec(path, uploads, public=True) -> str:
    spec = sources.uploaded_tsv_spec(str(path), uploads, public=public)
    sources.discard_upload_copy(spec)
    return spec


def test_an_uploaded_tsv_over_the_caps_is_refused_while_copied(uploads, monkeypatch):
    """Issue 67's 10-million-line TSV and its 100 MB line, scaled down (the caps lowered); a private studio
    takes them; a .gz is counted unpacked. RSS measured around the refusal of a 30 MB one-line file."""
    monkeypatch.setattr(limits, "PUBLIC_MAX_CORPUS_LINES", 1_000)
    many = uploads / "many.tsv"
    many.write_text("ein Haus\ta house\n" * 1_001)
    with pytest.raises(ValueError, match="^The uploaded TSV has more than 1,000 lines; this public studio trains on "
                                         "at most 1,000 pairs"):
        _spec(many, uploads)
    _spec(many, uploads, public=False)
    packed = uploads / "many.tsv.gz"
    packed.write_bytes(gzip.compress(many.read_bytes()))
    with pytest.raises(ValueError, match=r"^The uploaded TSV \(unpacked\) has more than 1,000 lines"):
        _spec(packed, uploads)
    long_line = uploads / "long.tsv"
    long_line.write_bytes(b"a\t" + b"b" * 30 * 2**20)  # one line, no newline: bigger than the corpus cap too
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match="^The uploaded TSV has a line of over 2,000 bytes; this public studio takes "
                                         "lines of at most 2,000"):
        _spec(long_line, uploads)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 10
    monkeypatch.setattr(limits, "PUBLIC_MAX_CORPUS_LINES", 1_000_000)
    split = uploads / "split.tsv"  # a long line across the copy's 1 MB chunks, ending after many short ones
    split.write_bytes(b"x\ty\n" * 300_000 + b"a\t" + b"b" * 2**20 + b"\nc\td\n")
    with pytest.raises(ValueError, match="a line of over 2,000 bytes"):
        _spec(split, uploads)
    monkeypatch.setattr(limits, "PUBLIC_MAX_CORPUS_MB", 1)
    big = uploads / "big.tsv"
    big.write_bytes(b"ein Haus\ta house\n" * 70_000)
    with pytest.raises(ValueError, match="^The uploaded TSV is over 1 MB; this public studio trains on at most 1 MB"):
        _spec(big, uploads)
    assert not list(uploads.parent.glob(f"../{sources.UPLOAD_COPY_PREFIX}*"))


def test_visitor_saves_keep_to_a_quota_and_shipped_checkpoints_stay(tmp_path, monkeypatch):
    """Issue 67's 25 saves of one run, scaled down: a run saves at most PUBLIC_SAVES_PER_RUN times; past
    PUBLIC_MAX_SAVES the oldest visitor save leaves the disk and the picker; a shipped checkpoint is never
    touched."""
    assert (limits.PUBLIC_SAVES_PER_RUN, limits.PUBLIC_MAX_SAVES, limits.PUBLIC_SAVES_MB) == (3, 6, 400)
    monkeypatch.setattr(limits, "PUBLIC_MAX_SAVES", 2)
    checkpoints = tmp_path / "checkpoints"
    shipped = save_checkpoint(checkpoints / "shipped", studio_bundle())
    job = TrainingJob(ModelRegistry(checkpoints), checkpoints, public=True)
    job.start(QUICK, "lecturer")
    wait_for(job, lambda v: v.state == "finished")
    saved = [job.save(f"mine{i}", "lecturer") for i in range(3)]
    assert not saved[0].exists() and saved[1].is_dir() and saved[2].is_dir() and shipped.is_dir()
    names = job.registry.names()
    assert "shipped" in names and saved[0].name not in names and saved[2].name in names
    with pytest.raises(ValueError, match="^This run has saved 3 checkpoints, the most one run may save on this "
                                         r"public studio \(3\); download the last one to keep it.$"):
        job.save("more", "lecturer")
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted(["shipped", saved[1].name, saved[2].name])


def test_two_saves_under_one_name_at_once_both_land(job):
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(lambda _: job.save("same"), range(2)))
    assert sorted(p.name for p in paths) == ["same-step30", "same-step30-2"]
    assert all(p.is_dir() for p in paths)
