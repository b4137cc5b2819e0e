"""What a part knocked out (core/explain/knockout.py) changes, measured where its section says it matters.

For one sentence (``knockout_effect``): the translation before and after; each token of the intact translation
scored by the intact and by the knocked-out model (teacher forcing: the same tokens, so the two probabilities
compare token by token); and the attention of the part's neighbours, the attention layer that reads what the part
wrote (``neighbour``), before and after, on that same pair. For the first sentences of a corpus
(``corpus_effect``): BLEU and chrF before and after, greedy by default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..inference.options import DecodeOptions
from ..inference.scoring import prepare_pair, score
from ..inference.translation import Translation, translate_detailed
from ..model.config import ModelConfig
from ..training.evaluation import EvalResult, evaluate_bleu
from .hooks import attention_maps
from .knockout import Knockout, knocked_out

GREEDY = DecodeOptions(method="greedy")


@dataclass(frozen=True)
class Neighbour:
    """The attention map that shows a knock-out: stack ("encoder", "decoder", "cross"), layer from 0, and why."""

    stack: str
    layer: int
    why: str


def neighbour(knockout: Knockout, config: ModelConfig) -> Neighbour:
    """The attention nearest the first part knocked out that it changes: the one reading the part's output."""
    first = knockout.parts[0] if knockout.parts else None
    if first == "positions":
        return Neighbour("encoder", 0, "the first encoder layer's self-attention reads the embeddings the positions "
                                       "were added to")
    if first == "scale":
        return Neighbour("encoder", 0, "the first encoder layer reads the same input either way: its weights differ "
                                       "by the scale alone")
    if first == "causal_mask":
        return Neighbour("decoder", 0, "the decoder's self-attention is where the mask kept each position from "
                                       "later ones")
    if first == "hide_source_token":
        return Neighbour("cross", config.decoder_layers - 1, "cross-attention is where the token is hidden")
    if first in ("residual", "layernorm"):
        part = getattr(knockout, first)[0]
        return _reader(part.stack, part.layer, part.part, config)
    if first == "layer":
        return _reader(knockout.layer[0].stack, knockout.layer[0].layer, "ffn", config)
    if first == "heads":
        stack, layer, _ = knockout.heads[0]
        return _reader("encoder" if stack == "encoder" else "decoder", layer,
                       "cross" if stack == "cross" else "self", config)
    return Neighbour("cross", config.decoder_layers - 1, "nothing is knocked out: the last cross-attention")


def _reader(stack: str, layer: int, part: str, config: ModelConfig) -> Neighbour:
    """The attention that reads what sub-layer `part` of stack's layer writes."""
    if stack == "decoder" and part == "self":
        return Neighbour("cross", layer, "its queries come from the self-attention's output")
    if stack == "encoder" and layer + 1 < config.encoder_layers:
        return Neighbour("encoder", layer + 1, "the next encoder layer reads this one's output")
    if stack == "encoder":
        return Neighbour("cross", 0, "cross-attention reads the encoder's output")
    if layer + 1 < config.decoder_layers:
        return Neighbour("decoder", layer + 1, "the next decoder layer reads this one's output")
    return Neighbour("cross", layer, "no attention reads the last decoder layer's output (the output projection "
                                     "does): its cross-attention, which the part comes after, is unchanged")


@dataclass
class Effect:
    """One sentence before and after a knock-out."""

    knockout: Knockout
    source_tokens: list[str]           # as the encoder reads them, "<eos>" last
    before: Translation                # the intact model's
    after: Translation                 # the knocked-out model's
    tokens: list[str]                  # the intact translation's tokens, "<eos>" last: what both scores score
    probabilities_before: np.ndarray   # (tokens,) each token's probability, teacher forced, intact
    probabilities_after: np.ndarray    # (tokens,) the same tokens' under the knock-out
    neighbour: Neighbour
    query_tokens: list[str]            # the rows of the neighbour's maps
    key_tokens: list[str]              # their columns
    attention_before: np.ndarray       # (heads, queries, keys) the neighbour's weights, intact
    attention_after: np.ndarray        # the same, knocked out
    notices: list[str]

    @property
    def changed(self) -> bool:
        return self.before.text != self.after.text

    @property
    def attention_shift(self) -> float:
        """How far the neighbour's weights moved: the total variation distance of each row (0: the same, 1:
        disjoint), averaged over heads and rows."""
        return float(0.5 * np.abs(self.attention_after - self.attention_before).sum(axis=-1).mean())

    @property
    def entropy(self) -> tuple[float, float]:
        """The neighbour's mean row entropy, in nats, before and after: lower is sharper."""
        def mean_entropy(p: np.ndarray) -> float:
            return float(-(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1).mean())
        return mean_entropy(self.attention_before), mean_entropy(self.attention_after)


def knockout_effect(bundle: Any, source: str, knockout: Knockout | None = None, options: DecodeOptions = GREEDY,
                    **parts: Any) -> Effect:
    """The sentence before and after the knock-out (a Knockout, or its fields as keywords). Runs on bundle's
    model: see knocked_out about a model others use meanwhile."""
    knockout = knockout if knockout is not None else Knockout(**parts)
    model = bundle.model
    knockout.check(model.config)
    before = translate_detailed(bundle, [source], options)[0]
    if not before.source_tokens:
        raise ValueError("the source is empty: there is nothing to knock out of its translation")
    hidden = knockout.hide_source_token
    if hidden is not None and hidden >= len(before.source_tokens):
        raise ValueError(f"hide_source_token {hidden} is past the source's {len(before.source_tokens)} tokens "
                         f"(0..{len(before.source_tokens) - 1}, <eos> last)")
    near = neighbour(knockout, model.config)
    pair = prepare_pair(bundle, source, before.ids)
    intact = score(bundle, [source], [before.ids], top_k=0)[0]
    maps_before = attention_maps(model, pair.src, pair.tgt_in)[near.stack][near.layer]
    with knocked_out(bundle, knockout):
        after = translate_detailed(bundle, [source], options)[0]
        knocked = score(bundle, [source], [before.ids], top_k=0)[0]
        maps_after = attention_maps(model, pair.src, pair.tgt_in)[near.stack][near.layer]
    queries, keys = _axes(near.stack, before.source_tokens, intact.tokens)
    return Effect(knockout, before.source_tokens, before, after, intact.tokens, np.exp(intact.token_logprobs),
                  np.exp(knocked.token_logprobs), near, queries, keys, maps_before.double().numpy(),
                  maps_after.double().numpy(), list(dict.fromkeys(before.notices + intact.notices)))


def _axes(stack: str, source: list[str], target: list[str]) -> tuple[list[str], list[str]]:
    """A map's rows and columns: source tokens (encoder), the target tokens each row predicts and the decoder's
    inputs (<bos> first) for its self-attention, the target's rows over the source for cross-attention."""
    if stack == "encoder":
        return source, source
    if stack == "decoder":
        return target, ["<bos>", *target[:-1]]
    return target, source


@dataclass
class CorpusEffect:
    """The first sentences of a corpus before and after a knock-out."""

    knockout: Knockout
    before: EvalResult
    after: EvalResult
    changed: int                           # the sentences whose translation changed
    examples: list[tuple[str, str, str]]   # (source, before, after) of the first few that changed


def corpus_effect(bundle: Any, pairs: Sequence[tuple[str, str]], knockout: Knockout | None = None,
                  options: DecodeOptions = GREEDY, on_batch: Callable[[int], None] | None = None,
                  examples: int = 3, **parts: Any) -> CorpusEffect:
    """BLEU and chrF (sacreBLEU) of (source, reference) pairs, translated intact and then knocked out (a Knockout,
    or its fields as keywords; hide_source_token hides that index in every source). on_batch(n) after each batch
    of n sentences, 2 · len(pairs) in all; raising from it stops the work."""
    knockout = knockout if knockout is not None else Knockout(**parts)
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    before = translate_detailed(bundle, sources, options, on_batch=on_batch)
    with knocked_out(bundle, knockout):
        after = translate_detailed(bundle, sources, options, on_batch=on_batch)
    differ = [(s, b.text, a.text) for s, b, a in zip(sources, before, after) if a.text != b.text]
    return CorpusEffect(knockout, evaluate_bleu([t.text for t in before], references),
                        evaluate_bleu([t.text for t in after], references), len(differ), differ[:examples])
