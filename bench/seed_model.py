"""Load seed 000's model (the notebook this project grew from) from ../shared/seeds for a
side-by-side benchmark. Its code is read at run time, not copied into this repository.

One fix is applied, and printed: its causal mask is float and `bool & float` fails on
torch 2.x, so the mask is cast to bool (the seed's intent).
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"
WANTED = ("PositionalEncoding", "MultiHeadAttention", "PositionwiseFeedForward", "EncoderLayer", "Encoder",
          "DecoderLayer", "Decoder", "create_padding_mask", "create_causal_mask", "create_tgt_mask",
          "Transformer", "LabelSmoothingLoss", "beam_search_decode", "greedy_decode")
FIX = "create_causal_mask returns float; cast to bool so `pad_mask & causal_mask` runs on torch 2.x"


def _top_level_blocks(text: str) -> dict[str, str]:
    """Top-level `class X` / `def f` blocks of the notebook text, by name."""
    blocks, name, lines = {}, None, []
    for line in text.splitlines():
        starts = line.startswith(("class ", "def "))
        if name and (starts or (line and not line[0].isspace() and not line.startswith("#"))):
            blocks[name] = "\n".join(lines)
            name = None
        if starts:
            name, lines = line.split()[1].split("(")[0].rstrip(":"), [line]
        elif name:
            lines.append(line)
    if name:
        blocks[name] = "\n".join(lines)
    return blocks


def load_seed000() -> dict:
    files = sorted(SEEDS.glob("000_*.txt"))
    if not files:
        raise SystemExit(f"seed 000 not found under {SEEDS}; the side-by-side benchmark needs ../shared")
    blocks = _top_level_blocks(files[0].read_text())
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math}
    for name in WANTED:
        exec(blocks[name], namespace)  # noqa: S102 - the project's own seed notebook, read for benchmarking
    causal = namespace["create_causal_mask"]
    namespace["create_causal_mask"] = lambda size, device: causal(size, device).bool()
    return namespace


def seed_config(vocab_size: int, n_layers: int = 3, d_model: int = 256, d_ff: int = 512, n_heads: int = 4,
                dropout: float = 0.1, max_len: int = 256):
    """The attribute bag seed 000's Transformer(config) reads."""
    from types import SimpleNamespace
    return SimpleNamespace(vocab_size=vocab_size, n_layers=n_layers, d_model=d_model, d_ff=d_ff,
                           n_heads=n_heads, dropout=dropout, max_seq_len=max_len, pad_idx=0)
