"""Which source tokens drove each target token: gradient attributions on the source embeddings,
word alignments read from cross-attention (section 3.2.3: "the queries come from the previous
decoder layer, and the memory keys and values come from the output of the encoder"), and a rank
correlation to compare the two.

Attributions explain f_t = log P(y_t | y_<t, x) of each target token (teacher forcing, as in
core.inference.scoring, <eos> included) in terms of the source token embeddings e_s = E[x_s] (the lookup,
before section 3.4's sqrt(d_model) scaling and 3.5's positions, which stay as they are):

- ``grad_x_input``: gradient × input (Shrikumar et al. 2016, "Not Just a Black Box"; the gradient
  saliency of Simonyan et al. 2014 times the input), A[t, s] = sum_d e_sd · ∂f_t/∂e_sd.
- ``integrated_gradients`` (Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks"):
  A[t, s] = sum_d e_sd · ∫_0^1 ∂f_t(α e)/∂e_sd dα, from the baseline of all-zero source token
  embeddings (each position keeps its positional encoding: only what the tokens are is taken
  away), the integral by the midpoint rule over `steps` points. Completeness: each row sums to
  f_t(x) - f_t(baseline), up to the rule's error.

Both are signed (positive: the token raised the target token's log-probability). With normalize
(the default) each row is divided by the sum of its absolute values, so |A[t]| sums to 1 and rows
compare across target tokens; normalize=False gives the raw values, in nats.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from ..inference.scoring import Pair, prepare_pair
from ..model.transformer import Transformer
from .hooks import attention_maps

METHODS = ("grad_x_input", "integrated_gradients")


class Stopped(RuntimeError):
    """The caller's should_stop() said to stop before the attribution was done."""


def attribution(bundle: Any, source: str, target: str | Sequence[int], method: str = "grad_x_input",
                steps: int = 32, *, normalize: bool = True, should_stop: Callable[[], bool] | None = None
                ) -> np.ndarray:
    """How much each source token drove each target token's log-probability: a (target tokens with
    <eos>) × (source tokens with <eos>) float64 array, rows and columns as core.score(bundle,
    [source], [target])[0].tokens and .source_tokens name them. target: text, or token ids
    (Translation.ids). steps: integration points (integrated gradients only). should_stop: asked
    before each backward pass (one per target token); True stops the work with Stopped (a server
    stops a request whose client has gone)."""
    if method not in METHODS:
        raise ValueError(f"unknown attribution method {method!r}; allowed: {', '.join(METHODS)}")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1; got {steps!r}")
    pair = _pair(bundle, source, target)
    alphas = [1.0] if method == "grad_x_input" else [(k + 0.5) / steps for k in range(steps)]
    model = bundle.model
    with _gradients_in_eval(model):
        embeddings = model.src_embed(torch.tensor(pair.src, device=model.src_embed.weight.device)).detach()
        gradients = path_gradients(model, pair.src, pair.tgt, alphas, should_stop)
        raw = (gradients * embeddings).sum(dim=-1).double().cpu().numpy()
    return _normalized(raw) if normalize else raw


def path_gradients(model: Transformer, src: list[int], tgt: list[int], alphas: Sequence[float],
                   should_stop: Callable[[], bool] | None = None) -> torch.Tensor:
    """(T, S, d_model): per target position t, the gradient of log P(tgt[t] | tgt[:t], src) with respect
    to the source token embeddings, averaged over the points α·e (α in alphas) of the straight path
    from zero. src and tgt end with <eos>.

    One forward pass of the pair at every point (a row each), then one backward pass per target
    token through that graph. bench/explain.py's 20-token pair, 32 points: 1.1 s on 2 idle cores (2.2 s
    of CPU time), no slower than batching the backward passes with vmap (is_grads_batched), and 1.5x
    faster than a row per (token, point) with the target cut after the token (one backward pass)."""
    device = model.src_embed.weight.device
    src_ids = torch.tensor([src], device=device).expand(len(alphas), -1)
    e = model.src_embed(src_ids[0]).detach()
    path = (torch.tensor(alphas, device=device, dtype=e.dtype)[:, None, None] * e).requires_grad_(True)
    tgt_in = torch.tensor([[model.config.bos_id] + tgt[:-1]], device=device).expand(len(alphas), -1)
    hidden = model.hidden(src_ids, tgt_in, src_embeddings=path).view(len(alphas), len(tgt), -1)
    gradients = []
    for t, token in enumerate(tgt):
        if should_stop is not None and should_stop():
            raise Stopped(f"attribution stopped after {t} of {len(tgt)} target tokens")
        log_prob = torch.log_softmax(model.project(hidden[:, t]).float(), dim=-1)[:, token].sum()
        (gradient,) = torch.autograd.grad(log_prob, path, retain_graph=t < len(tgt) - 1)
        gradients.append(gradient.mean(dim=0))
    return torch.stack(gradients)


def _normalized(raw: np.ndarray) -> np.ndarray:
    """Each row over the sum of its absolute values (a row of zeros stays zeros)."""
    total = np.abs(raw).sum(axis=1, keepdims=True)
    return np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)


@contextlib.contextmanager
def _gradients_in_eval(model: Transformer) -> Iterator[None]:
    """Eval mode (no dropout) with gradients on, whatever the caller's mode; restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            yield
    finally:
        model.train(was_training)


# ----- cross-attention ---------------------------------------------------------------------------
def cross_attention(bundle: Any, source: str, target: str | Sequence[int], layer: int = -1) -> np.ndarray:
    """The decoder's cross-attention of one layer (-1: the last), averaged over its heads: (target
    tokens with <eos>) × (source tokens with <eos>), each row a distribution over the source. Row t is
    the query that predicts target token t (its input is the token before, <bos> first)."""
    pair = _pair(bundle, source, target)
    layers = bundle.model.config.decoder_layers
    if not isinstance(layer, int) or isinstance(layer, bool) or not -layers <= layer < layers:
        raise ValueError(f"layer {layer!r} is out of range: this model's decoder has {layers} layers "
                         f"(0..{layers - 1}, or -{layers}..-1 from the last)")
    cross = attention_maps(bundle.model, pair.src, pair.tgt_in)["cross"]  # (L, h, T, S)
    return cross[layer].mean(dim=0).double().numpy()


def alignment(bundle: Any, source: str, target: str | Sequence[int], layer: int = -1) -> list[tuple[int, int]]:
    """Word alignments as fairseq's ``--print-alignment`` prints them: (source index, target index)
    pairs, 0-based token indices, one per target token <eos> aside, each to the source token (<eos>
    aside) with the highest cross-attention averaged over the heads of `layer`. fairseq's default
    is the last decoder layer (TransformerDecoder.extract_features: "alignment_layer ... default:
    last layer", averaged over alignment_heads, default all; utils.extract_hard_alignment takes the
    argmax with <eos> and padding left out), as here."""
    attention = cross_attention(bundle, source, target, layer)[:-1, :-1]  # <eos> rows and columns out
    return [(int(s), t) for t, s in enumerate(attention.argmax(axis=1))]


# ----- comparing maps ----------------------------------------------------------------------------
def rank_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rank correlation of each row of a with the same row of b (e.g. an attribution map
    and cross_attention), ties given their average rank: one value per row in [-1, 1], NaN where a
    row is constant (no ranking to compare)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"rank_correlation compares two maps of the same (rows, columns) shape, got "
                         f"{a.shape} and {b.shape}")
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(axis=1, keepdims=True), rb - rb.mean(axis=1, keepdims=True)
    norm = np.sqrt((ra ** 2).sum(axis=1) * (rb ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm > 0, (ra * rb).sum(axis=1) / np.where(norm > 0, norm, 1), math.nan)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Per row, the rank of each entry from 1, ties sharing the mean of the ranks they span."""
    ranks = np.empty_like(x)
    for i, row in enumerate(x):
        _, inverse, counts = np.unique(row, return_inverse=True, return_counts=True)
        start = np.cumsum(counts) - counts  # how many entries are smaller than each distinct value
        ranks[i] = (start + (counts + 1) / 2)[inverse]
    return ranks


def _pair(bundle: Any, source: str, target: str | Sequence[int]) -> Pair:
    pair = prepare_pair(bundle, source, target)
    if pair.empty:
        raise ValueError(f"the source {source[:40]!r} is empty: there is nothing to attend to or attribute")
    for notice in pair.notices:  # truncation, <unk>: what the array alone does not show
        warnings.warn(notice, stacklevel=3)
    return pair
