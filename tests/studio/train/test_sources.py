"""Where the Train tab's data may come from (studio/train/sources.py): a corpus folder under the shared data
trains and paths outside the data folders are refused; an uploaded TSV trains, its malformed lines are named
and its copy deleted once read or refused; a Hugging Face dataset offline is said, or refused at once when
the cache lacks it."""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

import core.training.prepare
from studio.server.registry import ModelRegistry
from studio.train import sources, tab
from tests.helpers.jobs import QUICK, panel, wait_for


def test_a_corpus_folder_under_shared_data_trains(job, multi30k):
    spec = sources.corpus_path_spec(str(multi30k))
    job.start(replace(QUICK, data=spec, limit=300, vocab_size=300, max_steps=2, name="m30k"))
    view = wait_for(job, lambda v: v.state == "finished")
    assert view.facts["vocabulary"].endswith("(bpe)") and view.facts["pairs"].startswith("300 training")
    assert job.registry.get("m30k").info["src_lang"] == "de"


def test_corpus_paths_outside_the_data_folders_are_refused(tmp_path):
    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "escape").symlink_to("/etc")
    roots = (data,)
    assert sources.corpus_path_spec(str(data / "corpus"), roots) == f"files:{data / 'corpus'}"
    assert sources.corpus_path_spec(f"{data}/pairs.tsv.gz:en-de", roots) == f"files:{data}/pairs.tsv.gz:en-de"
    assert sources.corpus_path_spec("corpus", roots) == f"files:{data / 'corpus'}"  # as named in a data folder
    with pytest.raises(ValueError, match="'nowhere' is not in them \\(a relative path starts at"):
        sources.corpus_path_spec("nowhere", roots)
    (tmp_path / "data-evil").mkdir()
    (tmp_path / "data-evil" / "x.tsv").write_text("a\tb\n")
    for bad in ("../../etc/passwd", "/etc/passwd", str(data / "escape" / "passwd"), f"{data}/../x.tsv", "",
                str(tmp_path / "data-evil" / "x.tsv")):  # a sibling whose name begins with the folder's: outside
        with pytest.raises(ValueError):
            sources.corpus_path_spec(bad, roots)
    (tmp_path / "up2").mkdir()
    (tmp_path / "up2" / "pairs.tsv").write_text("a\tb\n")
    with pytest.raises(ValueError, match="not uploaded through the studio"):
        sources.uploaded_tsv_spec(str(tmp_path / "up2" / "pairs.tsv"), root=tmp_path / "up")
    # Resolved: ../shared may be a link.
    multi30k = (sources.ROOT.parent / "shared/data/multi30k").resolve()
    assert sources.corpus_path_spec("../shared/data/multi30k") == f"files:{multi30k}"


def test_uploaded_tsv_with_malformed_lines_is_refused_with_line_numbers(job, tmp_path):
    upload = tmp_path / "up" / "pairs.txt"
    upload.parent.mkdir()
    upload.write_text("eins\tone\nzwei two\ndrei\tthree\nvier\n", encoding="utf-8")
    spec = sources.corpus_spec(sources.SOURCES[2], "", "", str(upload), "", uploads=tmp_path / "up")
    assert spec.endswith("/pairs.txt.tsv")  # named as uploaded: the message names the user's file
    with pytest.raises(ValueError, match=r"Cannot start: pairs\.txt\.tsv line 2, 4: fewer than 2 tab-separated "
                                         r"columns"):
        job.start(replace(QUICK, data=spec))
    sources.discard_upload_copy(spec)  # as the Train tab does (this test calls the job itself)
    assert job.view().state == "idle" and job.registry.names() == []
    with pytest.raises(ValueError, match="not uploaded through the studio"):
        sources.uploaded_tsv_spec("/etc/passwd", tmp_path / "up")


def test_uploaded_tsv_trains(job, tmp_path):
    upload = tmp_path / "up" / "pairs.tsv"
    upload.parent.mkdir()
    upload.write_text("".join(f"{n} {n + 1}\t{n + 1} {n}\n" for n in range(60)) + "\n7\t \n", encoding="utf-8")
    spec = sources.corpus_spec(sources.SOURCES[2], "", "", str(upload), "", uploads=tmp_path / "up")
    job.start(replace(QUICK, data=spec, max_steps=4, vocab_size=64, name="tsv"))
    sources.discard_upload_copy(spec)  # read: as the Train tab does
    view = wait_for(job, lambda v: v.state == "finished")
    assert view.facts["vocabulary"].endswith("(bpe)") and job.registry.names() == ["tsv"]
    # Said on the status line: the two lines left out, and that 58 pairs can only be learnt by heart.
    assert view.facts["notice"] == ("2 pairs with an empty side were left out (lines 61, 62). Only 58 training "
                                    "pairs: enough to learn them by heart, not to translate new sentences (the "
                                    "validation figures will stay low).")


def test_an_uploaded_tsvs_copy_is_deleted_once_read_or_refused(job, tmp_path, monkeypatch):
    """Every Start copied the upload (up to 200 MB) into a temporary folder that stayed, refused Starts'
    too: on a public studio, Start pressed during another visitor's run filled /tmp."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))  # where the studio takes uploads from
    upload = tmp_path / "pairs.tsv"
    upload.write_text("".join(f"{n} {n + 1}\t{n + 1} {n}\n" for n in range(60)), encoding="utf-8")
    copies = lambda: set(Path(tempfile.gettempdir()).glob(f"{sources.UPLOAD_COPY_PREFIX}*"))  # noqa: E731
    before = copies()
    from_upload = dict(kind=sources.SOURCES[2], upload=str(upload), name="tsv", vocab_size=64, max_steps=3)
    assert tab.start(job, *panel(**from_upload, n_heads=3))[1].startswith(tab.NOT_STARTED)  # 64 / 3 heads
    assert copies() == before
    assert not tab.start(job, *panel(**from_upload))[1].startswith(tab.NOT_STARTED)
    assert copies() == before  # read: the run needs it no more
    wait_for(job, lambda v: v.state == "finished")
    job.start(replace(QUICK, max_steps=10_000))
    assert "one at a time" in tab.start(job, *panel(**from_upload))[1] and copies() == before


def test_hugging_face_offline_message_reaches_the_user(job, monkeypatch):
    spec = sources.corpus_spec(sources.SOURCES[3], "", "", None, " bentrevett/multi30k ")
    assert spec == "hf:bentrevett/multi30k"

    def offline(spec, *args, **kwargs):
        raise ValueError(f"{spec}: huggingface.co is unreachable; set HF_HUB_OFFLINE=1 to use a cached copy")

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a studio started with the network allowed
    monkeypatch.setattr(core.training.prepare, "load_corpus", offline)
    with pytest.raises(ValueError, match="Cannot start: hf:bentrevett/multi30k: huggingface.co is unreachable"):
        job.start(replace(QUICK, data=spec))
    with pytest.raises(ValueError, match="Hugging Face dataset name"):
        sources.corpus_spec(sources.SOURCES[3], "", "", None, "  ")


def test_offline_a_hugging_face_dataset_not_in_the_cache_is_refused_at_once(job, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as the studio runs
    monkeypatch.setattr(sources, "hf_cache_dirs", lambda: (tmp_path / "hub", tmp_path / "datasets"))
    loaded = []

    def loader(spec, *args, **kwargs):
        loaded.append(spec)
        raise ValueError("the loader's own message")

    monkeypatch.setattr(core.training.prepare, "load_corpus", loader)
    with pytest.raises(ValueError, match=r"^Cannot start: the Hugging Face dataset bentrevett/multi30k is not in "
                                         r"this machine's Hugging Face cache, and the studio runs offline"):
        job.start(replace(QUICK, data="hf:bentrevett/multi30k"))
    assert loaded == []  # refused before the slow loader is even imported
    (tmp_path / "hub" / "datasets--bentrevett--multi30k").mkdir(parents=True)
    (tmp_path / "datasets" / "opus_books").mkdir(parents=True)
    assert sources.hf_cached("bentrevett/multi30k") and sources.hf_cached("opus_books")
    with pytest.raises(ValueError, match="the loader's own message"):  # cached: handed to the loader
        job.start(replace(QUICK, data="hf:opus_books:de-en"))
    assert loaded == ["hf:opus_books:de-en"]
    hf_box = next(b for b in tab_blocks(tmp_path) if getattr(b, "placeholder", None) == "bentrevett/multi30k")
    assert "only one already in this machine's Hugging Face cache (the studio runs offline" in hf_box.label


def tab_blocks(tmp_path) -> list:
    """The components of an app with the Train tab."""
    from studio.app import build_app

    return list(build_app(ModelRegistry(None), checkpoints_dir=tmp_path / "checkpoints").blocks.values())
