"""core.data.tokenizer: subword vocabularies give German and English text back exactly."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.data.files import load_corpus
from core.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "de_en_sample.tsv"  # 20 hand-written pairs


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    corpus = load_corpus(f"files:{SAMPLE}:de-en")
    return [s for pair in corpus.train + corpus.valid + corpus.test for s in pair]


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def subword(request, sentences) -> Tokenizer:
    return Tokenizer.train(sentences * 3, vocab_size=400, kind=request.param)


def test_round_trip_on_training_text(subword, sentences):
    for text in sentences:
        ids = subword.encode(text)
        assert UNK_ID not in ids
        assert subword.decode(ids) == text


@pytest.mark.parametrize("text", [
    "Größe, Öl & Käse: über 3,50 €!",
    "„Können Sie mir helfen?“, fragte Jürgen.",
    "The café's size is 12 m² (50 % smaller)...",
    "Straße",
])
def test_round_trip_on_new_text(subword, text):
    # New words built from known characters: the vocabulary falls back to smaller pieces.
    assert subword.decode(subword.encode(text)) == text


def test_specials_and_save_load(subword, tmp_path):
    assert subword.tokens([PAD_ID, BOS_ID, EOS_ID, UNK_ID]) == ["<pad>", "<bos>", "<eos>", "<unk>"]
    subword.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json")
    text = "Ein Mädchen läuft über die Brücke."
    assert again.encode(text) == subword.encode(text) and again.kind == subword.kind


def test_load_names_a_missing_or_broken_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such tokenizer file"):
        Tokenizer.load(tmp_path / "tokenizer.json")
    with pytest.raises(ValueError, match="a folder, not a tokenizer.json file"):
        Tokenizer.load(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{ not json")
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        Tokenizer.load(tmp_path / "tokenizer.json")


def test_word_kind_round_trip_on_spaced_tokens():
    tok = Tokenizer.train(["drei hundert ein und zwanzig", "2 0 2 1 - 0 3 - 0 5"], 100, "word", min_frequency=1)
    for text in ("ein und zwanzig", "2 0 2 1 - 0 3 - 0 5"):
        assert tok.decode(tok.encode(text)) == text


def test_word_kind_trains_on_text_holding_special_token_words():
    # A corpus's literal "<unk>" was counted as a word and shifted the ids after the specials.
    tok = Tokenizer.train(["ein <unk> und <pad> zwanzig"] * 2, 100, "word")
    assert tok.encode("ein <unk> und") == [tok.hf.token_to_id("ein"), UNK_ID, tok.hf.token_to_id("und")]


@pytest.mark.parametrize("size", ["100", 100.5, True])
def test_vocab_size_must_be_a_whole_number(size):
    with pytest.raises(ValueError, match="vocab_size must be a whole number"):
        Tokenizer.train(["ein und zwanzig"], size, "word")


def test_a_vocabulary_is_learnt_only_from_a_list_of_sentences_and_within_bounds():
    with pytest.raises(TypeError, match="not one str"):
        Tokenizer.train("hello world hello world", 50)  # read one character per sentence, it learnt letters
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got int"):
        Tokenizer.train(["a b", 5], 50)
    for empty in ([], ["", "  "]):
        with pytest.raises(ValueError, match="no text to learn a vocabulary from"):
            Tokenizer.train(empty, 50)
    with pytest.raises(ValueError, match="vocab_size must be from 5 to 1,000,000, got 1000000000"):
        Tokenizer.train(["hello world"], 10**9)  # the Rust trainer aborted the process allocating 70 GB
    with pytest.raises(ValueError, match="min_frequency must be a whole number >= 0"):
        Tokenizer.train(["hello world"], 50, min_frequency=-1)


def test_unknown_characters_are_reported(subword):
    assert subword.unknown_pieces("Das ist 猫.") == ["猫"]


def test_typed_special_tokens_are_text_not_control_ids(subword):
    """A typed "<pad>" mid-sentence became id 0: the batch holding it was refused as not right-padded
    (translation and training alike), and a typed "<eos>" would have ended a target."""
    word = Tokenizer.train(["ein und zwanzig"], 100, "word", min_frequency=1)
    for tok in (subword, word):
        for text in ("ein <pad> und", "<bos> ein <eos>"):
            ids = tok.encode(text)
            assert not {PAD_ID, BOS_ID, EOS_ID} & set(ids) and tok.encode_batch([text]) == [ids]
            assert tok.unknown_pieces(text)  # what it could not spell, reported
    assert word.unknown_pieces("ein <pad> und") == ["<pad>"]


def test_a_generated_unk_stays_in_the_text_as_a_word(subword):
    """Dropped with the other specials, a word the model could not name vanished from its output unsaid."""
    hat, dot = subword.encode("Ein Hut"), subword.encode(".")
    assert subword.decode([BOS_ID] + hat + [UNK_ID] + dot + [EOS_ID, PAD_ID]) == "Ein Hut <unk> ."
    assert subword.decode([UNK_ID, UNK_ID] + hat) == "<unk> <unk> Ein Hut"
    assert subword.decode([UNK_ID]) == "<unk>" and subword.decode([BOS_ID, EOS_ID]) == ""
    word = Tokenizer.train(["ein und zwanzig"], 100, "word", min_frequency=1)
    assert word.decode(word.encode("ein") + [UNK_ID] + word.encode("zwanzig")) == "ein <unk> zwanzig"


def _ordinary_text(alphabet: str):
    """Words of known characters separated by single spaces: what a sentence looks like."""
    word = st.text(alphabet=alphabet, min_size=1, max_size=12)
    return st.lists(word, min_size=1, max_size=8).map(" ".join)


_ALPHABET = sorted({c for line in SAMPLE.read_text(encoding="utf-8").splitlines() for c in line} - {" ", "\t"})


@settings(max_examples=60, deadline=None)
@given(text=_ordinary_text("".join(_ALPHABET)))
def test_round_trip_property(subword, text):
    assert subword.decode(subword.encode(text)) == text



class CountingEncoder:
    """A tokenizers.Tokenizer that counts its encode() calls."""

    def __init__(self, hf):
        self.hf, self.calls = hf, 0

    def encode(self, *args, **kwargs):
        self.calls += 1
        return self.hf.encode(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.hf, name)


@pytest.mark.parametrize("text", ["Ein Hund läuft.", "Zwölf ☃ Äpfel <pad> und 日本", "", "  ", "<eos>"])
def test_encode_with_unknown_is_encode_and_unknown_pieces_in_one_pass(subword, text, monkeypatch):
    """Translation's one-pass reading of a source, beside the two calls it replaces."""
    from core.data.batching import source_ids
    from core.inference.translation import prepare_source

    assert subword.encode_with_unknown(text) == (subword.encode(text), subword.unknown_pieces(text))
    expected = prepare_source(subword, text, 256)
    counting = CountingEncoder(subword.hf)
    monkeypatch.setattr(subword, "hf", counting)
    source = prepare_source(subword, text, 256)
    assert counting.calls == (1 if text.strip() else 0)
    assert (source.ids, source.notices) == (expected.ids, expected.notices)
    assert source.ids == (source_ids(subword, text) if text.strip() else [])


def test_what_check_raises_stops_the_learning_as_the_texts_are_read():
    from core.data.tokenizer import CHECK_EVERY

    class Stopped(Exception):
        pass
    calls, read = [], []

    def check() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise Stopped()

    def texts():
        for i in range(10 * CHECK_EVERY):
            read.append(i)
            yield f"satz {i} und noch einer"
    with pytest.raises(Stopped):
        Tokenizer.train(texts(), vocab_size=100, check=check)
    assert len(calls) == 3 and len(read) <= 2 * CHECK_EVERY + 1  # stopped at the third check, not at the end
