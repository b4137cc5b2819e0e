"""Layer by layer: what each decoder layer's output would predict, read through the model's own output
(the "logit lens": nostalgebraist, 2020; ecco's and TransformerLens's per-layer rankings, for decoder-only models).

Section 3.4's pre-softmax projection turns the last decoder layer's output into next-token logits. The lens puts
every decoder layer's output through the same projection, after the final LayerNorm where the model has one
(pre-norm models; a post-norm model's layers end in a LayerNorm each and it has none at the end), and asks at
each target position: which tokens would this layer say, and where does it rank the token finally chosen? The
last layer's lens is the model's own output distribution, exactly (tests/core/explain/test_logit_lens.py).
Teacher forced: each position reads the target before it, as scoring does (core/inference/scoring.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..inference.options import DecodeOptions
from ..inference.scoring import prepare_pair
from ..inference.steps import inference
from ..inference.translation import target_tokenizer, translate_detailed
from ..model.transformer import Transformer

GREEDY = DecodeOptions(method="greedy")


def layer_log_probs(model: Transformer, src: Sequence[int], tgt_in: Sequence[int]) -> torch.Tensor:
    """(decoder layers, T, V) float32 log-probabilities of the next token: each decoder layer's output (forward
    hooks), through the final LayerNorm (the identity for post-norm) and the output projection, as the model
    projects its last layer. One sentence pair: src ends with <eos>, tgt_in starts with <bos>."""
    outputs: list[torch.Tensor] = []
    handles = [layer.register_forward_hook(lambda module, args, out: outputs.append(out[0]))
               for layer in model.decoder_layers]
    device = model.generator.weight.device
    try:
        with inference(model):
            model(torch.tensor([list(src)], device=device), torch.tensor([list(tgt_in)], device=device))
            # The model's own step: project(decoder_norm(y)) on (1, T, d_model), then log_softmax in fp32.
            lens = torch.cat([torch.log_softmax(model.project(model.decoder_norm(y.view(1, -1, y.size(-1)))).float(),
                                                dim=-1) for y in outputs])
    finally:
        for handle in handles:
            handle.remove()
    return lens.cpu().clone()  # a plain tensor, not inference mode's: a caller may write into it


@dataclass
class LogitLens:
    """Per decoder layer (rows from the first) and target position (columns): what the layer would predict."""

    source_tokens: list[str]           # as the encoder reads them, "<eos>" last
    tokens: list[str]                  # the target, "<eos>" last: position t predicts tokens[t]
    top_tokens: list[list[list[str]]]  # [layer][position][k]: the layer's top_k tokens there, best first
    top_probabilities: np.ndarray      # (layers, positions, k) their probabilities
    probabilities: np.ndarray          # (layers, positions) the probability of tokens[t]
    ranks: np.ndarray                  # (layers, positions) its rank, 1 = the layer's top token
    final_norm: bool                   # read through a final LayerNorm (a pre-norm model)
    notices: list[str]

    @property
    def decided_at(self) -> list[int | None]:
        """Per position, the first layer (from 0) from which tokens[t] ranks first in every layer above; None
        where even the last layer prefers another (a target the model would not have written)."""
        decided: list[int | None] = []
        for column in self.ranks.T:
            layer = len(column)
            while layer and column[layer - 1] == 1:
                layer -= 1
            decided.append(layer if layer < len(column) else None)
        return decided


def logit_lens(bundle: Any, source: str, target: str | Sequence[int] | None = None, top_k: int = 5,
               options: DecodeOptions = GREEDY) -> LogitLens:
    """The lens of every decoder layer over target (text, or ids without <eos>; None: the model's own translation
    by options, greedy by default). Ranks and top tokens leave out <pad> and <bos>, which no decoder writes."""
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"top_k must be an integer >= 1; got {top_k!r}")
    if target is None:
        target = translate_detailed(bundle, [source], options)[0].ids
    pair = prepare_pair(bundle, source, target)
    if pair.empty:
        raise ValueError("the source is empty: there is no translation to look into")
    model = bundle.model
    log_probs = layer_log_probs(model, pair.src, pair.tgt_in)
    log_probs[..., [model.config.pad_id, model.config.bos_id]] = -math.inf
    chosen = log_probs[:, torch.arange(len(pair.tgt)), torch.tensor(pair.tgt)]  # (L, T)
    ranks = (log_probs > chosen[..., None]).sum(dim=-1) + 1
    top_lp, top_ids = log_probs.topk(min(top_k, log_probs.size(-1) - 2), dim=-1)
    tokenizer = target_tokenizer(bundle)
    top_tokens = [[tokenizer.tokens(ids) for ids in layer] for layer in top_ids.tolist()]
    return LogitLens(pair.source_tokens, pair.tokens, top_tokens, top_lp.exp().double().numpy(),
                     chosen.exp().double().numpy(), ranks.numpy(), model.config.norm_first, pair.notices)
