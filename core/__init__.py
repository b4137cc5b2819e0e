"""Transformer Studio core: the model of "Attention Is All You Need" and what trains,
decodes and evaluates it. No UI imports here."""
from .config import PRESETS, SPECIAL_TOKENS, ModelConfig
from .model import DecoderCache, Transformer
from .positional import sinusoidal_encoding

__all__ = ["PRESETS", "SPECIAL_TOKENS", "ModelConfig", "DecoderCache", "Transformer", "sinusoidal_encoding"]
