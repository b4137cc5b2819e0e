"""Studio test helpers: a small untrained model (fast to build; its outputs are arbitrary but
deterministic) with a word vocabulary of German example sentences, a registry holding it, the toasts
the callbacks raise, and a link's query parameters as the page reads them."""
from __future__ import annotations

import functools
from urllib.parse import parse_qsl

import pytest
import torch

from core.bundle import ModelBundle
from core.data.tokenizer import Tokenizer
from core.model.config import ModelConfig
from core.model.transformer import Transformer

SENTENCES = ["Ein Hund rennt durch den Schnee .", "Zwei junge Männer spielen Fußball auf einer Wiese .",
             "Eine Frau geht die Straße entlang ."]


@functools.lru_cache(maxsize=None)
def studio_bundle(max_len: int = 24) -> ModelBundle:
    tokenizer = Tokenizer.train(SENTENCES, vocab_size=64, kind="word", min_frequency=1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        # With attention biases: so initialised, the untrained model writes words for every example
        # sentence (without, its best beam hypothesis for the first is an immediate <eos>: an empty
        # translation, which the tests of what a translation shows cannot use).
        config = ModelConfig.from_preset("tiny", src_vocab_size=tokenizer.vocab_size,
                                         tgt_vocab_size=tokenizer.vocab_size, max_len=max_len, attention_bias=True)
        model = Transformer(config).eval()
    return ModelBundle(model, tokenizer, info={"name": "studio-tiny", "examples": SENTENCES})


def studio_registry():
    from studio.server.registry import ModelRegistry

    registry = ModelRegistry(None)
    registry.add("studio-tiny", studio_bundle())
    return registry


@pytest.fixture
def toasts(monkeypatch) -> list[str]:
    """Every gr.Info / gr.Warning message the callbacks raise (Gradio renders them as HTML)."""
    import gradio as gr

    seen: list[str] = []
    monkeypatch.setattr(gr, "Info", lambda message, *a, **k: seen.append(message))
    monkeypatch.setattr(gr, "Warning", lambda message, *a, **k: seen.append(message))
    return seen


def link_params(link: str) -> dict[str, str]:
    """A link's query parameters (studio/links/address.py), as a page reads them."""
    return dict(parse_qsl(link.removeprefix("?"), keep_blank_values=True))
