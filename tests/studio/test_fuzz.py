"""Issue 10: fuzzing with hypothesis — tokenizers never fail and give ordinary text back exactly;
the studio's text callbacks take any Unicode (lone surrogates, control characters, 100k
characters) and any option values, and answer with a message, never an exception."""
from __future__ import annotations

import math
import unicodedata
from pathlib import Path

import gradio as gr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.checkpoint import load_checkpoint
from core.data.files import load_corpus
from core.data.tokenizer import Tokenizer
from studio.server import limits
from studio.tabs import attention, beam, translate
from tests.helpers.shipped import NUMBERS
from tests.helpers.studio import SENTENCES, studio_registry

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "de_en_sample.tsv"
MODEL = "studio-tiny"
REGISTRY = studio_registry()
# Any code point at all: lone surrogates (JSON can carry them) and control characters included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=300)



@pytest.fixture(scope="module", autouse=True)
def quiet_toasts():
    """gr.Info/gr.Warning outside a request print or warn; hundreds of examples need neither."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(gr, "Info", lambda *a, **k: None)
        m.setattr(gr, "Warning", lambda *a, **k: None)
        yield


# ----- tokenizers ----------------------------------------------------------------------------
def _sample_sentences() -> list[str]:
    corpus = load_corpus(f"files:{SAMPLE}:de-en")
    return [s for pair in corpus.train + corpus.valid + corpus.test for s in pair]


TOKENIZERS = {kind: Tokenizer.train(_sample_sentences() * 3, vocab_size=400, kind=kind) for kind in ("bpe", "unigram")}
if NUMBERS.is_dir():
    TOKENIZERS["word (shipped numbers model)"] = load_checkpoint(NUMBERS).tokenizer
ALPHABET = "".join(sorted({c for s in _sample_sentences() for c in s} - {" "}))


def ordinary(text: str) -> bool:
    """Text the round trip promises to keep: NFC, words separated by single spaces."""
    words = text.split(" ")
    return (text == unicodedata.normalize("NFC", text) and all(words)
            and not any(c.isspace() for w in words for c in w))


def ordinary_text(alphabet: str):
    word = st.text(alphabet=alphabet, min_size=1, max_size=12)
    return st.lists(word, min_size=1, max_size=10).map(" ".join)


@pytest.mark.parametrize("kind", list(TOKENIZERS))
@FUZZ
@given(text=st.one_of(st.text(max_size=200), ordinary_text(ALPHABET)))
def test_tokenizer_takes_any_text_and_keeps_ordinary_text(kind, text):
    tok = TOKENIZERS[kind]
    ids = tok.encode(text)
    assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
    back = tok.decode(ids)
    assert isinstance(back, str)
    if ordinary(text) and not tok.unknown_pieces(text):
        assert back == text


@FUZZ
@given(words=st.lists(st.sampled_from(sorted(set(" ".join(SENTENCES).split()))), min_size=1, max_size=12))
def test_word_vocabulary_round_trip(words):
    tok = REGISTRY.get(MODEL).tokenizer
    text = " ".join(words)
    assert tok.decode(tok.encode(text)) == text


# ----- input cleaning ------------------------------------------------------------------------
@FUZZ
@given(text=st.one_of(ANY_TEXT, st.text(st.characters(exclude_categories=()), min_size=60, max_size=2000)))
def test_clean_input_bounds_and_sanitises(text):
    cleaned, notices = limits.clean_input(text, limit=50)
    assert len(cleaned) <= 50
    cleaned.encode("utf-8")  # no lone surrogate left
    assert not any(unicodedata.category(c) == "Cs" for c in cleaned)
    assert not any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in cleaned)
    assert bool(notices) == (cleaned != text)
    assert limits.clean_input(cleaned, limit=50) == (cleaned, [])  # idempotent


# ----- the callbacks ---------------------------------------------------------------------------
# What Gradio lets through: it refuses slider values outside their range before the callback
# runs; the seed box (a Textbox) takes any text.
OPTIONS = st.fixed_dictionaries({
    "method": st.sampled_from(["beam", "greedy", "sample"]),
    "beam_size": st.integers(1, 16),
    "alpha": st.floats(0, 2),
    "max_extra": st.integers(0, 200),
    "n_best": st.integers(1, 16),
    "temperature": st.floats(0.05, 3),
    "top_k": st.integers(0, 100),
    "top_p": st.floats(0.05, 1),
    "seed": st.one_of(st.just(""), st.integers(-5, 10**6).map(str), st.integers(2**62, 2**70).map(str),
                      st.text(max_size=30)),
})


@FUZZ
@given(text=ANY_TEXT, o=OPTIONS)
def test_translate_answers_any_text_and_options_with_a_message(text, o):
    translation, fig, table, notes, current = translate.translate(
        REGISTRY, MODEL, text, o["method"], o["beam_size"], o["alpha"], o["max_extra"], o["n_best"],
        o["temperature"], o["top_k"], o["top_p"], o["seed"])
    assert isinstance(translation, str) and isinstance(notes, str) and isinstance(table, str)
    assert "<" not in notes and "<" not in table  # Markdown-escaped
    current.source.encode("utf-8")  # what the Attention tab receives is valid text
    rows = [line for line in table.splitlines() if line.startswith("| ")][2:]  # under the header and alignment
    assert all(math.isfinite(float(row.split(" | ")[1].replace("\\", ""))) for row in rows)


@FUZZ
@given(text=ANY_TEXT, size=st.one_of(st.integers(1, 16), st.none(), st.just("x"), st.integers(-3, 99)))
def test_beam_search_and_attention_answer_any_text(text, size):
    search, *shown = beam.act_and_render("run", REGISTRY, None, None, MODEL, text, size, 0.6, "gnmt", 5)
    assert search is None or search.view.done  # None: refused (empty text), said on the page
    assert all("<" not in s for s in shown if isinstance(s, str))
    current, _ = attention.translate_here(REGISTRY, MODEL, text)
    if isinstance(current, attention.Current) and current.source:
        analysis, header, *_ = attention.show(REGISTRY, current)
        assert "<" not in header
