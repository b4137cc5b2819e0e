"""Which source tokens drove each target token: gradient attributions on the source embeddings,
word alignments read from cross-attention (section 3.2.3: "the queries come from the previous
decoder layer, and the memory keys and values come from the output of the encoder"), and how far the
two agree (``compare``: whether they put a target token's most weight on the same source token; a rank
correlation only for sentences long enough for one to mean something).

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
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from ..data.tokenizer import LANGUAGE_TAG_TOKEN
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


def embedding_attribution(model: Transformer, src: list[int], tgt_in: list[int],
                          objective: Callable[[torch.Tensor], torch.Tensor], alphas: Sequence[float] = (1.0,)
                          ) -> np.ndarray:
    """A[s] = e_s · (the mean over α in alphas of ∂objective/∂e_s at α·e), for any objective of one pair's final
    decoder states: objective maps them, (len(alphas), T, d_model), to one value per point, (len(alphas),).
    alphas (1.0,): gradient × input; the midpoints of [0, 1]: integrated gradients from all-zero token embeddings,
    as attribution's. (S,) float64, signed, raw (in the objective's units). core.explain.contrast's objective is a
    difference of two probabilities."""
    device = model.src_embed.weight.device
    with _gradients_in_eval(model):
        embeddings = model.src_embed(torch.tensor(src, device=device)).detach()
        path = (torch.tensor(list(alphas), device=device, dtype=embeddings.dtype)[:, None, None] * embeddings)
        path.requires_grad_(True)
        rows = len(alphas)
        hidden = model.hidden(torch.tensor([src], device=device).expand(rows, -1),
                              torch.tensor([tgt_in], device=device).expand(rows, -1), src_embeddings=path)
        (gradient,) = torch.autograd.grad(objective(hidden.view(rows, len(tgt_in), -1)).sum(), path)
    return (gradient.mean(dim=0) * embeddings).sum(dim=-1).detach().double().cpu().numpy()


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
# Source tokens a rank correlation needs at the least (language tags and <eos> not counted).
MIN_RANKED = 8
NOT_WORDS = frozenset({"<pad>", "<bos>", "<eos>"})


def is_word(token: str) -> bool:
    """Whether a token stands for the text (a word or a piece of one, <unk> included), not for the
    model's control tokens (<pad>, <bos>, <eos>) or a two-way model's language tag (<2es>)."""
    return token not in NOT_WORDS and not LANGUAGE_TAG_TOKEN.fullmatch(token)


@dataclass(frozen=True)
class Agreement:
    """How far an attribution map and an attention map of the same (target tokens) × (source tokens)
    agree, per target token (row), over the source tokens that are words (``columns``; <eos>, <bos>
    and language tags left out, as fairseq's alignments leave out <eos>). Rows not ``measured`` (a
    target <eos> or tag, a row of zero attribution, a source with no word) hold -1 and NaN.

    - ``top``: 1.0 where the source token of largest |attribution| is the one of largest attention
      (tied maxima: any in common), 0.0 where not. Sound for a sentence of three words: it asks only
      where each map puts its most weight, which both show at a glance.
    - ``share``: the attention on the most-attributed source token, as a share of the attention on
      the words (1: all of it); ``top_share`` the same for the most-attended token (so share ==
      top_share where they agree, and the gap says how near a disagreement came).
    - ``rho``: Spearman's ρ of |attribution| and attention over the words, only where there are at
      least ``MIN_RANKED`` of them (NaN otherwise, and for a constant row). On a few tokens ρ is no
      measure: it weighs every rank alike, so when both maps put most of a row on one token, the order
      of the near-zero rest (noise) decides it. For "Zwei Hunde spielen im Schnee." → "Two dogs play in
      the snow." both maps point "dogs" at "Hunde" (integrated gradients: 0.76 of |attribution|; 0.88 of
      the attention on words), yet ρ is 0.03 over its 6 source tokens and 0.3 over its 5 words; and ρ of
      two unrelated rankings of n tokens spreads with standard deviation 1/sqrt(n-1): 0.5 for 5 tokens,
      0.38 for 8.
    """

    columns: np.ndarray         # (S,) bool: the source tokens compared
    measured: np.ndarray        # (T,) bool: the rows compared
    top_attributed: np.ndarray  # (T,) int: the source token of largest |attribution| (-1: not measured)
    top_attended: np.ndarray    # (T,) int: the source token of largest attention (-1: not measured)
    top: np.ndarray             # (T,) 1.0 agree, 0.0 not, NaN not measured
    share: np.ndarray           # (T,) attention on top_attributed over the attention on the words
    top_share: np.ndarray       # (T,) attention on top_attended over the attention on the words
    rho: np.ndarray             # (T,) Spearman's rho over the words; NaN under MIN_RANKED words or constant

    @property
    def agreed(self) -> int:
        """The rows whose most-attributed source token is the most-attended one."""
        return int(np.nansum(self.top))

    @property
    def compared(self) -> int:
        """The rows measured."""
        return int(self.measured.sum())

    @property
    def fraction(self) -> float:
        """agreed / compared (NaN when no row is measured)."""
        return self.agreed / self.compared if self.compared else math.nan

    @property
    def words(self) -> int:
        """The source tokens compared."""
        return int(self.columns.sum())

    @property
    def chance(self) -> float:
        """The fraction of agreement one would expect by chance: 1 / words (NaN when there is none)."""
        return 1.0 / self.words if self.words else math.nan

    @property
    def mean_rho(self) -> float:
        """The mean of the rows' rho where it exists (NaN when none does: a short sentence)."""
        finite_rows = self.rho[np.isfinite(self.rho)]
        return float(finite_rows.mean()) if finite_rows.size else math.nan


def compare(attribution: np.ndarray, attention: np.ndarray, source_tokens: Sequence[str],
            target_tokens: Sequence[str] | None = None, min_ranked: int = MIN_RANKED) -> Agreement:
    """Where an attribution map (signed: its absolute values are compared) and an attention map put
    each target token's weight, over the source tokens that are words (see Agreement). Rows and
    columns as attribution() and cross_attention() give them; target_tokens (optional) names the rows,
    so that <eos> and language-tag rows are left out."""
    a, w = np.abs(np.asarray(attribution, dtype=np.float64)), np.asarray(attention, dtype=np.float64)
    if a.ndim != 2 or a.shape != w.shape:
        raise ValueError(f"compare takes two maps of the same (rows, columns) shape, got {a.shape} and {w.shape}")
    if len(source_tokens) != a.shape[1] or (target_tokens is not None and len(target_tokens) != a.shape[0]):
        raise ValueError(f"compare: {len(source_tokens)} source tokens and "
                         f"{'no' if target_tokens is None else len(target_tokens)} target tokens name a map of "
                         f"shape {a.shape}")
    columns = np.array([is_word(t) for t in source_tokens], dtype=bool)
    rows = np.ones(a.shape[0], dtype=bool) if target_tokens is None else np.array(
        [is_word(t) for t in target_tokens], dtype=bool)
    n = a.shape[0]
    where = np.flatnonzero(columns)
    if where.size == 0:  # no source word: nothing to compare
        nothing = np.full(n, math.nan)
        return Agreement(columns, np.zeros(n, dtype=bool), np.full(n, -1), np.full(n, -1), nothing, nothing,
                         nothing, nothing)
    a, w = a[:, where], w[:, where]
    a_max, w_max, mass = a.max(axis=1), w.max(axis=1), w.sum(axis=1)
    measured = rows & (a_max > 0) & (mass > 0)
    # Tied maxima (to float64's rounding) count as one place: agreement is a maximum in common.
    on_top_a = np.isclose(a, a_max[:, None], rtol=1e-9, atol=0)
    on_top_w = np.isclose(w, w_max[:, None], rtol=1e-9, atol=0)
    common = on_top_a & on_top_w
    agree = common.any(axis=1)
    pick_a = np.where(agree, common.argmax(axis=1), a.argmax(axis=1))  # a maximum in common named on both sides
    pick_w = np.where(agree, common.argmax(axis=1), w.argmax(axis=1))
    top_attributed = np.where(measured, where[pick_a], -1)
    top_attended = np.where(measured, where[pick_w], -1)
    top = np.where(measured, agree, math.nan)
    safe = np.where(mass > 0, mass, 1.0)
    share = np.where(measured, w[np.arange(n), pick_a] / safe, math.nan)
    top_share = np.where(measured, w_max / safe, math.nan)
    rho = np.full(n, math.nan)
    if where.size >= min_ranked:
        rho = np.where(measured, rank_correlation(a, w), math.nan)
    return Agreement(columns, measured, top_attributed, top_attended, top, share, top_share, rho)


def rank_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rank correlation of each row of a with the same row of b (e.g. an attribution map
    and cross_attention), ties given their average rank: one value per row in [-1, 1], NaN where a
    row is constant (no ranking to compare). Meaningless for a row of a few tokens (see Agreement):
    compare() gives it only from MIN_RANKED words up."""
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
