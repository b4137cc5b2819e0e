"""Test helpers: a tiny Transformer trained in a few seconds to reverse a sequence of letters,
so that decoders are tested on a model whose outputs are sensible and terminate.

Trained with a hand-written loop over core.model.transformer and torch only (no trainer), once per
test session (``functools.lru_cache``), under a private RNG state.
"""
from __future__ import annotations

import functools
import random

import torch
import torch.nn.functional as F

from core.bundle import ModelBundle
from core.data.batching import pad_ids
from core.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from core.model.config import ModelConfig
from core.model.transformer import Transformer

LETTERS = [chr(c) for c in range(ord("a"), ord("a") + 12)]
MAX_LEN = 32  # small, so the truncation and clamping paths are cheap to reach
STEPS = 300
BATCH = 32


def reverse_task(rng: random.Random) -> tuple[str, str]:
    """One (source, target) pair: 3 to 8 letters and the same letters reversed."""
    words = [rng.choice(LETTERS) for _ in range(rng.randint(3, 8))]
    return " ".join(words), " ".join(reversed(words))


def reverse_sources(n: int, seed: int) -> list[str]:
    """n sources of the reverse task, the same ones for the same seed."""
    rng = random.Random(seed)
    return [reverse_task(rng)[0] for _ in range(n)]


def _train(model: Transformer, tokenizer: Tokenizer, rng: random.Random) -> None:
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    # Decaying the rate to zero takes the model from ~70% to ~99% exact reversals: at a constant
    # rate its last steps wander, so which short inputs it got right depended on the machine's
    # rounding (CI's model once read "a b c d" as "d c a").
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / STEPS)
    model.train()
    for _ in range(STEPS):
        pairs = [reverse_task(rng) for _ in range(BATCH)]
        src = pad_ids([tokenizer.encode(s) + [EOS_ID] for s, _ in pairs])
        tgt = pad_ids([[BOS_ID] + tokenizer.encode(t) + [EOS_ID] for _, t in pairs])
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    model.eval()


@functools.lru_cache(maxsize=None)
def tiny_bundle() -> ModelBundle:
    """The trained reverse model with its word-level tokenizer (vocabulary: specials + letters)."""
    tokenizer = Tokenizer.train([" ".join(LETTERS)], vocab_size=64, kind="word", min_frequency=1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size,
                                         tgt_vocab_size=tokenizer.vocab_size, max_len=MAX_LEN)
        model = Transformer(config)
        _train(model, tokenizer, random.Random(0))
    return ModelBundle(model, tokenizer, info={"name": "tiny-reverse"})


EN_ES_PAIRS = [("Go.", "Ve."), ("Go.", "Vete."), ("Go away.", "Vete."), ("Hi.", "Hola."), ("Run!", "¡Corre!"),
               ("Stop!", "¡Para!"), ("Wait!", "¡Espera!"), ("Hello!", "Hola."), ("Fire!", "¡Fuego!")]


def two_way_bundle() -> ModelBundle:
    """An untrained tiny model of both directions, en<->es (core/data/directions.py): enough to see where tags go."""
    tokenizer = Tokenizer.train([s for pair in EN_ES_PAIRS for s in pair] * 5, 120)
    tokenizer.add_language_tags(["<2en>", "<2es>"])
    config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    info = {"name": "two-way", "src_lang": "en", "tgt_lang": "es", "directions": [["en", "es"], ["es", "en"]],
            "examples_by_lang": {"en": ["Hi."], "es": ["Hola."]}}
    return ModelBundle(Transformer(config).eval(), tokenizer, info)
