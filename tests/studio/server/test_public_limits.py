"""Issue 43's holes: --public's parameter cap held on the model actually built (BPE's alphabet capped), and
zip uploads refused on their total size and on overlapping or duplicate entries before anything is written."""
from __future__ import annotations

import random
import re
import struct
import subprocess
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

import core.data.tokenizer
from core.checkpoint import FILES as CHECKPOINT_FILES
from core.checkpoint import save_checkpoint
from core.data.tokenizer import Tokenizer
from studio.server import limits, uploads
from studio.server.registry import ModelRegistry
from studio.train import setup as run_setup
from studio.train.job import Settings, TrainingJob
from tests.helpers.studio import studio_bundle

ONE_STEP = Settings(max_steps=1, max_tokens=256, warmup=1, eval_every=1, attention_every=1, preset="small",
                    vocab_size=9, name="cjk")


@pytest.fixture(autouse=True)
def few_eval_sentences(monkeypatch):
    monkeypatch.setattr(run_setup, "EVAL_SENTENCES", 2)


def cjk_tsv(folder: Path, characters: int = 80_000) -> Path:
    """A TSV whose sentences use ~characters distinct CJK ideographs and Hangul syllables between them."""
    pool = [chr(c) for c in range(0x4E00, 0x9FFF)] + [chr(c) for c in range(0xAC00, 0xD7A4)]
    pool += [chr(c) for c in range(0x20000, 0x20000 + max(0, characters - len(pool)))]  # CJK extension B
    random.Random(0).shuffle(pool)
    lines = [f"{''.join(pool[i:i + 20])}\t{''.join(pool[i + 20:i + 40])}" for i in range(0, len(pool) - 40, 40)]
    path = folder / "cjk.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bpe_holds_the_vocabulary_size_asked_for_whatever_the_alphabet():
    pool = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    texts = ["".join(pool[i:i + 10]) for i in range(0, 3000, 10)] * 2
    for size in (9, 100, 1000):
        assert Tokenizer.train(texts, size, "bpe").vocab_size <= size
    # A usual corpus keeps every character: the cap only binds where characters outnumber the vocabulary.
    english = Tokenizer.train(["the quick brown fox jumps over the lazy dog"] * 3, 200, "bpe")
    assert "<unk>" not in english.tokens(english.encode("the lazy fox"))


def wait_ended(job: TrainingJob, timeout: float = 300.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.view().state in ("finished", "stopped", "failed"):
            return job.view().state
        time.sleep(0.05)
    raise TimeoutError(job.view().state)


def test_80k_characters_cannot_outgrow_the_public_cap(tmp_path):
    """The bypass replayed: ~80k distinct characters, small preset, vocabulary 9 under --public."""
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints", public=True)
    job.start(replace(ONE_STEP, data=f"files:{cjk_tsv(tmp_path)}"), "visitor")
    assert wait_ended(job) == "finished"
    facts = job.view().facts
    assert facts["vocabulary"] == "9 (bpe)"
    assert int(facts["parameters"].replace(",", "")) <= 10_000_000


def test_the_cap_is_checked_on_the_model_built(tmp_path, monkeypatch):
    """Should a tokenizer outgrow the size asked for again, the model it builds is refused before training."""
    real = core.data.tokenizer.trainers.BpeTrainer
    monkeypatch.setattr(core.data.tokenizer.trainers, "BpeTrainer",
                        lambda **kw: real(**{k: v for k, v in kw.items() if k != "limit_alphabet"}))
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints", public=True)
    with pytest.raises(ValueError, match=r"^Cannot start: this public studio trains models of at most 10M "
                                         r"parameters, and this one has [0-9.]+M\."):
        job.start(replace(ONE_STEP, data=f"files:{cjk_tsv(tmp_path, 40_000)}"), "visitor")
    assert job.view().state == "idle" and job.registry.names() == []


# ----- zip uploads ------------------------------------------------------------------------------
def overlapping_zip(path: Path, entries: int = 20, size: int = 8 * 2**20) -> Path:
    """A zip bomb's shape: one deflated stream of size zeros, and entries central-directory records all
    pointing at it under other folders' names (each name as long as the first)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a/model.safetensors", bytes(size))
    data = path.read_bytes()
    central, end = data.index(b"PK\x01\x02"), data.index(b"PK\x05\x06")
    record = data[central:end]
    records = [record.replace(b"a/model", f"{chr(97 + i % 26)}/model".encode()) for i in range(entries)]
    eocd = bytearray(data[end:])
    struct.pack_into("<HHII", eocd, 8, entries, entries, len(record) * entries, central)
    path.write_bytes(data[:central] + b"".join(records) + bytes(eocd))
    return path


@pytest.fixture
def unzipped(monkeypatch) -> list[str]:
    """The members the upload began to write out."""
    written: list[str] = []
    real = uploads._unzip_member

    def recording(archive, member, target, name, unpacked):
        written.append(name)
        return real(archive, member, target, name, unpacked)
    monkeypatch.setattr(uploads, "_unzip_member", recording)
    return written


def test_a_zip_of_overlapping_entries_is_refused_at_once_unwritten(registry, tmp_path, toasts, unzipped):
    bomb = overlapping_zip(tmp_path / "bomb.zip")
    began = time.monotonic()
    uploads.open_checkpoint(registry, [str(bomb)], "studio-tiny")
    assert time.monotonic() - began < 2.0 and unzipped == []
    assert re.match(r"Cannot open bomb\.zip: its entries \S+ and \S+ overlap", toasts[-1])
    assert registry.names() == ["studio-tiny"]


def test_a_zip_holding_a_checkpoint_file_twice_is_refused_unwritten(registry, tmp_path, toasts, unzipped):
    folder = save_checkpoint(tmp_path / "ck", studio_bundle())
    twice = tmp_path / "twice.zip"
    with zipfile.ZipFile(twice, "w") as z:
        for top in ("ck", "again"):
            for p in sorted(folder.iterdir()):
                z.write(p, f"{top}/{p.name}")
    uploads.open_checkpoint(registry, [str(twice)], "studio-tiny")
    assert toasts[-1].startswith("Cannot open twice.zip: it holds config.json twice") and unzipped == []


def test_a_zip_is_refused_on_its_total_unpacked_size(registry, tmp_path, toasts, unzipped, monkeypatch):
    monkeypatch.setattr(limits, "MAX_UNPACKED_MB", 1)  # each file within the per-file limit, not all together
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as z:
        for name in CHECKPOINT_FILES:
            z.writestr(f"ck/{name}", bytes(2**19))
    uploads.open_checkpoint(registry, [str(big)], "studio-tiny")
    assert toasts[-1].startswith("Cannot open big.zip: its checkpoint files come to 2 MB unpacked; the studio "
                                 "accepts at most 1 MB in all") and unzipped == []


# ----- bad input gets a clear message --------------------------------------------------------------
@pytest.mark.parametrize("typed, said", [
    ("abc", "beam size 'abc' is not a number; using the default 4"),
    ("NaN", "beam size 'NaN' is not a number; using the default 4"),
    (0, "beam size 0 is below the minimum 1; using 1"),
    (-1, "beam size -1 is below the minimum 1; using 1"),
    (1e9, "beam size 1e+09 is above the maximum 16; using 16")])
def test_the_translate_tabs_beam_size_says_what_it_used(registry, typed, said):
    from studio.components import TypedSlider
    from studio.tabs import translate

    box = TypedSlider(1, 16, value=4, step=1, label="beam size")
    assert box.get_block_name() == "slider" and box.preprocess(typed) == typed  # the callback sees it as it came
    text, _, _, notes, current = translate.translate(registry, "studio-tiny", "ein Hund", "beam", typed, 0.6, 10, 4,
                                                     1.0, 0, 1.0, None)
    assert said in notes.replace("\\", "") and current.options is not None


def test_a_corpus_path_with_a_nul_byte_is_named_plainly():
    from studio.train import sources

    with pytest.raises(ValueError, match=r"^A path cannot hold a NUL character"):
        sources.corpus_path_spec("multi30k\0/../etc")


def test_the_download_zip_is_deleted_when_the_studio_exits(tmp_path):
    """A fresh process zips a checkpoint for download and exits: its folder in /tmp goes with it."""
    script = ("import sys; from pathlib import Path; from studio.train.downloads import Downloads; "
              "from core.checkpoint import save_checkpoint; from tests.helpers.studio import "
              "studio_bundle; print(Downloads().zip_checkpoint(save_checkpoint(Path(sys.argv[1]), studio_bundle())))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "ck")], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3], timeout=120)
    made = Path(done.stdout.strip())
    assert done.returncode == 0 and made.name == "ck.zip" and made.parent.name.startswith("studio-downloads-")
    assert not made.parent.exists()
