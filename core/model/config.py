"""Model hyper-parameters: one dataclass, the paper's presets, JSON round trip.

Presets follow Table 3 of the paper ("base" and "big"), fairseq's
``transformer_iwslt_de_en``, and two sizes that train on a laptop CPU. Table 3's variations are
fields: heads and their key size (rows A, B), sizes (C), dropout (D; label smoothing is a training
setting), learned positions (E).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # Table 3, row "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1.
    "paper-base": dict(encoder_layers=6, decoder_layers=6, d_model=512, d_ff=2048, n_heads=8, dropout=0.1),
    # Table 3, row "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3.
    "paper-big": dict(encoder_layers=6, decoder_layers=6, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3),
    # fairseq transformer_iwslt_de_en: the paper's base with a narrower FFN and 4 heads (and fairseq's
    # biases on the attention projections).
    "iwslt": dict(encoder_layers=6, decoder_layers=6, d_model=512, d_ff=1024, n_heads=4, dropout=0.3,
                  attention_bias=True),
    # Trains on Multi30k on a CPU in about an hour.
    "small": dict(encoder_layers=3, decoder_layers=3, d_model=256, d_ff=1024, n_heads=4, dropout=0.1),
    # Learns a synthetic lecture task on two CPU cores in under a minute.
    "tiny": dict(encoder_layers=2, decoder_layers=2, d_model=64, d_ff=256, n_heads=4, dropout=0.0),
}

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")  # ids 0, 1, 2, 3
POSITIONAL = ("sinusoidal", "learned")  # section 3.5's two choices (Table 3, row E)
# The positional table (section 3.5) holds every position up to max_len, computed or learned: a config
# asking for 10**8 positions (a typo, an uploaded config.json) would allocate gigabytes at once.
MAX_POSITIONS = 16_384
INT64_MAX = 2**63 - 1  # torch's integers (a generator's seed, a tensor's size) are 64-bit


@dataclass
class ModelConfig:
    """Everything needed to rebuild a Transformer's shapes (not its weights)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    # Section 3.4: one vocabulary for both languages and three-way weight tying.
    # False: separate vocabularies; only the decoder's input and output embeddings are tied.
    shared_vocab: bool = True
    d_model: int = 512
    n_heads: int = 8
    # Section 3.2.2's d_k, the size of each head's queries and keys; None: d_model / n_heads, as in the
    # paper's base model. Values keep d_v = d_model / n_heads, so Concat(head_1..head_h) is d_model wide.
    # Table 3, row B shrinks d_k alone.
    d_k: int | None = None
    d_ff: int = 2048
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1  # Section 5.4, residual dropout
    attention_dropout: float = 0.0  # not in the paper; fairseq's option
    norm_first: bool = False  # False: the paper's post-norm LayerNorm(x + Sublayer(x))
    # False: the paper's projections W^Q, W^K, W^V, W^O (3.2.2) are matrices alone; True adds a bias to
    # each, as fairseq does (checkpoints written before this option have them).
    attention_bias: bool = False
    max_len: int = 256  # longest source or target sequence, in tokens (with bos/eos)
    # Section 3.5: "sinusoidal" (computed for any position) or "learned" (a trained table of max_len rows,
    # which "produced nearly identical results", Table 3 row E): it holds no position past max_len.
    positional: str = "sinusoidal"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        """d_v: the size of each head's values (and, unless d_k is set, of its queries and keys)."""
        return self.d_model // self.n_heads

    @property
    def key_size(self) -> int:
        """d_k: the size of each head's queries and keys."""
        return self.d_head if self.d_k is None else self.d_k

    def validate(self) -> None:
        """Raise ValueError naming the offending field and what is allowed."""
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff",
                     "encoder_layers", "decoder_layers", "max_len"):
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.max_len > MAX_POSITIONS:
            raise ValueError(f"ModelConfig.max_len must be at most {MAX_POSITIONS:,} tokens, got {self.max_len:,}")
        for name in ("shared_vocab", "norm_first", "attention_bias"):
            if not isinstance(getattr(self, name), bool):  # the string "false" would count as true
                raise ValueError(f"ModelConfig.{name} must be true or false, got {getattr(self, name)!r}")
        if self.positional not in POSITIONAL:
            raise ValueError(f"ModelConfig.positional must be one of {', '.join(POSITIONAL)}, got {self.positional!r}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"ModelConfig.d_model must be even for sinusoidal encodings, got {self.d_model}")
        if self.d_model % self.n_heads:
            divisors = [h for h in range(1, min(self.d_model, 64) + 1) if self.d_model % h == 0]
            raise ValueError(f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads "
                             f"({self.n_heads}); allowed n_heads for this d_model: {', '.join(map(str, divisors))}")
        if self.d_k is not None and (not _is_int(self.d_k) or not 0 < self.d_k <= self.d_model):
            raise ValueError(f"ModelConfig.d_k must be a whole number from 1 to d_model ({self.d_model}) or null "
                             f"(d_model / n_heads), got {self.d_k!r}")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value < 1.0:
                raise ValueError(f"ModelConfig.{name} must be a number in [0, 1), got {value!r}")
        if self.shared_vocab and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("ModelConfig.shared_vocab=True needs src_vocab_size == tgt_vocab_size "
                             f"(got {self.src_vocab_size} and {self.tgt_vocab_size})")
        # The tokenizer (core/data/tokenizer.py) always gives the specials these ids; a config that
        # said otherwise would decode with the wrong end-of-sentence token.
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id, "unk_id": self.unk_id}
        for (name, value), expected in zip(ids.items(), range(len(SPECIAL_TOKENS))):
            if not _is_int(value) or value != expected:
                raise ValueError(f"ModelConfig.{name} must be {expected}, the tokenizer's id for "
                                 f"{SPECIAL_TOKENS[expected]}, got {value!r}")
        if min(self.src_vocab_size, self.tgt_vocab_size) < len(SPECIAL_TOKENS):
            raise ValueError(f"ModelConfig vocabularies need room for the {len(SPECIAL_TOKENS)} special tokens, "
                             f"got {self.src_vocab_size} and {self.tgt_vocab_size}")

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "ModelConfig":
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; allowed presets: {', '.join(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **overrides})

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "ModelConfig":
        if not isinstance(values, dict):
            raise ValueError(f"a ModelConfig needs an object of fields, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s) {unknown}; allowed fields: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
