"""Issue 43's holes: --public's parameter cap held on the model actually built (BPE's alphabet capped), and
zip uploads refused on their total size and on overlapping or duplicate entries before anything is written."""
from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path

import pytest

import core.tokenizer
from core.tokenizer import Tokenizer
from studio import run_setup
from studio.registry import ModelRegistry
from studio.training import Settings, TrainingJob

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
    real = core.tokenizer.trainers.BpeTrainer
    monkeypatch.setattr(core.tokenizer.trainers, "BpeTrainer",
                        lambda **kw: real(**{k: v for k, v in kw.items() if k != "limit_alphabet"}))
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints", public=True)
    with pytest.raises(ValueError, match=r"^Cannot start: this public studio trains models of at most 10M "
                                         r"parameters, and this one has [0-9.]+M\."):
        job.start(replace(ONE_STEP, data=f"files:{cjk_tsv(tmp_path, 40_000)}"), "visitor")
    assert job.view().state == "idle" and job.registry.names() == []
