"""Subword vocabularies (section 5.1: "a shared source-target vocabulary") with the
Hugging Face ``tokenizers`` library, saved as one ``tokenizer.json``.

Kinds: ``bpe`` (byte-pair encoding, the paper's choice for En-De), ``unigram``
(SentencePiece-style), ``word`` (whole words; for the synthetic lecture tasks).
Subword kinds use SentencePiece's metaspace, so decode(encode(text)) gives the
text back with its spacing and punctuation, and BLEU is computed on real text.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from ..model.config import SPECIAL_TOKENS

KINDS = ("bpe", "unigram", "word")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)
# The paper's vocabularies have 32-37k entries. The Rust trainer allocates for vocab_size up front:
# 10**9 asked it for 70 GB and aborted the whole process, a notebook's kernel included.
MAX_VOCAB = 1_000_000
# A language tag token, e.g. <2es> (core/data/directions.py writes them before a source).
LANGUAGE_TAG_TOKEN = re.compile(r"<2[A-Za-z_]+>")
CHECK_EVERY = 1_000  # Tokenizer.train's check(): often enough to stop within a moment, rarely enough to cost nothing


class Tokenizer:
    """Text <-> ids. Specials: <pad>=0, <bos>=1, <eos>=2, <unk>=3. encode() adds no bos/eos."""

    def __init__(self, hf: HFTokenizer, prefix: Sequence[int] = ()):
        for i, token in enumerate(SPECIAL_TOKENS):
            if hf.token_to_id(token) != i:
                raise ValueError(f"tokenizer must map {token} to id {i}, got {hf.token_to_id(token)}")
        # Text is text: "<pad>" typed in a sentence is spelled out, not read as the control token
        # (a pad inside a source broke the whole batch; a typed "<eos>" would have ended a target).
        hf.encode_special_tokens = True
        self.hf = hf
        # Ids put before every encoded text: a language tag (core/data/directions.py) that binds a model serving
        # both directions to one of them.
        self.prefix = list(prefix)

    def with_prefix(self, token: str) -> "Tokenizer":
        """This tokenizer, every text it encodes starting with token (one of its added tokens, e.g. <2es>)."""
        token_id = self.hf.token_to_id(token)
        if token_id is None:
            raise ValueError(f"{token} is not a token of this vocabulary")
        return Tokenizer(self.hf, [token_id])

    @property
    def base(self) -> "Tokenizer":
        """This tokenizer without its prefix (what encodes the target side)."""
        return Tokenizer(self.hf) if self.prefix else self

    def _prefixed(self, ids: list[int]) -> list[int]:
        """ids after the prefix; a language tag typed at the start gives way to it (the bound direction decides),
        and an empty text stays empty (a tag alone is no sentence)."""
        if not self.prefix or not ids:
            return ids
        if LANGUAGE_TAG_TOKEN.fullmatch(self.hf.id_to_token(ids[0]) or ""):
            ids = ids[1:]
        return self.prefix + ids

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000, kind: str = "bpe",
              min_frequency: int = 2, check: Callable[[], None] | None = None) -> "Tokenizer":
        """Learn a vocabulary of at most vocab_size entries (specials included) from texts. BPE keeps
        only the vocab_size - 4 most frequent characters (the rest read as <unk>): it used to keep every
        character it saw, so ~80k distinct CJK characters made vocabulary 9 come out 79,845 entries and
        the model thrice the size its limits were checked on. For a shared vocabulary pass both
        languages' sentences. check() is called every CHECK_EVERY texts as they are read: what it raises
        ends the training (the studio's Stop; the merges after the last text run in Rust, uninterrupted)."""
        if kind not in KINDS:
            raise ValueError(f"unknown tokenizer kind {kind!r}; allowed: {', '.join(KINDS)}")
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
            raise ValueError(f"vocab_size must be a whole number, got {vocab_size!r}")
        if not len(SPECIAL_TOKENS) < vocab_size <= MAX_VOCAB:
            raise ValueError(f"vocab_size must be from {len(SPECIAL_TOKENS) + 1} to {MAX_VOCAB:,}, got {vocab_size}")
        if not isinstance(min_frequency, int) or isinstance(min_frequency, bool) or min_frequency < 0:
            raise ValueError(f"min_frequency must be a whole number >= 0, got {min_frequency!r}")
        if isinstance(texts, (str, bytes)):  # it would be read as one sentence per character
            raise TypeError(f"texts must be an iterable of sentences, not one {type(texts).__name__}: "
                            f"{texts[:60]!r}")
        specials = list(SPECIAL_TOKENS)
        if kind == "word":
            hf = HFTokenizer(models.WordLevel(unk_token="<unk>"))
            hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
            hf.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
            trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                                special_tokens=specials)
        elif kind == "bpe":
            hf = HFTokenizer(models.BPE(unk_token="<unk>"))
            trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                          special_tokens=specials, show_progress=False,
                                          limit_alphabet=vocab_size - len(specials))
        else:
            hf = HFTokenizer(models.Unigram())
            trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                              unk_token="<unk>", show_progress=False)
        hf.normalizer = normalizers.NFC()
        if kind != "word":
            hf.pre_tokenizer = pre_tokenizers.Metaspace()
            hf.decoder = decoders.Metaspace()
        characters: set[str] = set()

        def counted(texts: Iterable[str]) -> Iterable[str]:
            for i, text in enumerate(texts):
                if check is not None and i % CHECK_EVERY == 0:
                    check()
                if not isinstance(text, str):
                    raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
                characters.update(text)
                if kind == "word":
                    # A corpus's own "<unk>" words would be counted as words and shift the ids
                    # after the specials; encode() maps them to <unk> anyway.
                    text = " ".join(w for w in text.split() if w not in SPECIAL_TOKENS)
                yield text

        try:
            hf.train_from_iterator(counted(texts), trainer=trainer)
        except Exception as exc:  # tokenizers raises a bare Exception
            if "not large enough to contain all chars" not in str(exc):
                raise
            # Unigram, unlike BPE, refuses to grow past vocab_size to hold every character it saw.
            need = len(characters - {" "}) + 1 + len(specials)  # the metaspace ▁ stands for " "
            raise ValueError(f"vocab_size {vocab_size} is too small: a unigram vocabulary of this text needs at "
                             f"least about {need} entries (each of its characters, and the {len(specials)} "
                             f"special tokens); give a larger one, or the bpe kind") from None
        if not any(not c.isspace() for c in characters):
            raise ValueError("no text to learn a vocabulary from: the texts are empty or only whitespace")
        return cls(hf)

    def add_language_tags(self, tags: Sequence[str]) -> "Tokenizer":
        """Add tags (core.data.directions' <2es>) as tokens of their own, matched in the text before subwords, after
        the learnt vocabulary (ids vocab_size, vocab_size + 1, ...). Unlike <pad>/<bos>/<eos> they are read
        from typed text: a tag is how a source asks for its target language."""
        self.hf.add_tokens([AddedToken(tag, normalized=False, single_word=False) for tag in tags])
        return self

    # ----- persistence -----------------------------------------------------------
    def save(self, path: str | Path) -> None:
        self.hf.save(str(path))

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"{path}: a folder, not a tokenizer.json file")
        if not path.is_file():  # tokenizers reports a missing file as a bare Exception too
            raise FileNotFoundError(f"{path}: no such tokenizer file")
        try:
            return cls(HFTokenizer.from_file(str(path)))
        except Exception as exc:  # tokenizers raises a bare Exception on malformed JSON
            raise ValueError(f"{path}: not a valid tokenizer.json ({exc})") from None

    def to_json(self) -> str:
        return self.hf.to_str()

    @classmethod
    def from_json(cls, text: str) -> "Tokenizer":
        return cls(HFTokenizer.from_str(text))

    # ----- use ------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    @property
    def kind(self) -> str:
        return json.loads(self.hf.to_str())["model"]["type"].lower().replace("wordlevel", "word")

    def encode(self, text: str) -> list[int]:
        return self._prefixed(_no_control(self.hf.encode(text, add_special_tokens=False).ids))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self._prefixed(_no_control(e.ids)) for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ids, <pad>/<bos>/<eos> dropped. A generated <unk> stays, as a word of its own: dropped
        too (the tokenizers default), a word the model could not name vanished from the output unsaid."""
        ids = list(ids)
        if UNK_ID not in ids:
            return self.hf.decode(ids, skip_special_tokens=True)
        words, run = [], []
        for i in ids + [UNK_ID]:  # the sentinel closes the last run
            if i != UNK_ID:
                run.append(i)
                continue
            text = self.hf.decode(run, skip_special_tokens=True)
            words += [text] if text else []
            words.append(SPECIAL_TOKENS[UNK_ID])
            run = []
        return " ".join(words[:-1])

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """Readable token strings for plots (metaspace shown as '▁')."""
        return [self.hf.id_to_token(i) or "<?>" for i in ids]

    def unknown_pieces(self, text: str) -> list[str]:
        """The parts of text that the vocabulary cannot represent (they become <unk>)."""
        return self.encode_with_unknown(text)[1]

    def encode_with_unknown(self, text: str) -> tuple[list[int], list[str]]:
        """encode(text) and unknown_pieces(text) from one pass of the tokenizer (translation reads every source
        this way: encoding it twice cost as much as a tenth of a short sentence's greedy decoding)."""
        enc = self.hf.encode(text, add_special_tokens=False)
        ids = _no_control(enc.ids)
        return self._prefixed(ids), [text[a:b] for i, (a, b) in zip(ids, enc.offsets) if i == UNK_ID]


def _no_control(ids: list[int]) -> list[int]:
    """ids with <pad>/<bos>/<eos> made <unk>: a word-level vocabulary still looks a typed "<pad>" up
    as a word, and only the model may place those three."""
    return [UNK_ID if i < UNK_ID else i for i in ids] if min(ids, default=UNK_ID) < UNK_ID else ids
