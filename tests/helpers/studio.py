"""Studio test helpers: a small untrained model (fast to build; its outputs are arbitrary but
deterministic) with a word vocabulary of German example sentences, a registry holding it, the Translate
tab's callback with its defaults, and a link's query parameters as the page reads them."""
from __future__ import annotations

import functools
from urllib.parse import parse_qsl

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


def link_params(link: str) -> dict[str, str]:
    """A link's query parameters (studio/links/address.py), as a page reads them."""
    return dict(parse_qsl(link.removeprefix("?"), keep_blank_values=True))


TRANSLATE_DEFAULTS = dict(method="beam", beam_size=4, alpha=0.6, max_extra=10, n_best=3, temperature=1.0, top_k=0,
                          top_p=1.0, seed=None)


def run_translate(registry, text: str, precision: str = "fp32", **changes) -> tuple:
    """The Translate tab's callback on studio-tiny: TRANSLATE_DEFAULTS with changes."""
    from studio.tabs import translate

    o = {**TRANSLATE_DEFAULTS, **changes}
    return translate.translate(registry, "studio-tiny", text, o["method"], o["beam_size"], o["alpha"],
                               o["max_extra"], o["n_best"], o["temperature"], o["top_k"], o["top_p"], o["seed"],
                               precision)
