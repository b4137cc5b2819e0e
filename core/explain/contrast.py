"""Why this word and not that one? A contrastive attribution: which source tokens drive the difference between
two candidates' probabilities at one target position (inseq's ``contrast_prob_diff`` step function: Yin &
Neubig, 2022, "Interpreting Language Models with Contrastive Explanations"), beside where cross-attention
looked from that position.

For position t of a target (teacher forced) and two candidate tokens a ("dogs") and b ("cats"):

    f = P(a | y_<t, x) - P(b | y_<t, x),    A[s] = e_s · ∂f/∂e_s     (gradient × input, core.explain.saliency)

positive where a source token's embedding raised a over b. Swapping a and b negates A; a token against itself
gives f = 0 and A = 0 (tests/core/explain/test_contrast.py). Where the model is sure (P(a) near 1) the softmax is
flat and the gradient of f small, its sign a matter of noise: on the shipped model, "Hunde" comes out *against*
"dogs" over "cat". method="integrated_gradients" adds the gradients up from all-zero embeddings (the saturation
Sundararajan et al. made them for; their sum is f(x) - f(zero embeddings)), and there "Hunde" carries half of the
difference. objective="logit" attributes the difference of the two logits instead (inseq's
``contrast_logits_diff``), log P(a)/P(b).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..inference.options import DecodeOptions
from ..inference.scoring import prepare_pair
from ..inference.steps import inference
from ..inference.translation import target_tokenizer, translate_detailed
from .hooks import attention_maps
from .saliency import METHODS, embedding_attribution

GREEDY = DecodeOptions(method="greedy")
OBJECTIVES = ("probability", "logit")


@dataclass
class Contrast:
    """One target position, two candidates, and the source tokens that drive the difference."""

    source_tokens: list[str]    # as the encoder reads them, "<eos>" last
    tokens: list[str]           # the target, "<eos>" last; position t predicts tokens[t] after tokens[:t]
    position: int
    token: str                  # candidate a (the target's own token there, unless another was asked)
    foil: str                   # candidate b
    probability: float          # P(a | y_<t, x)
    foil_probability: float     # P(b | y_<t, x)
    objective: str              # "probability": f = P(a) - P(b); "logit": f = logit(a) - logit(b)
    method: str                 # "grad_x_input" or "integrated_gradients"
    attribution: np.ndarray     # (S,) e_s · ∂f/∂e_s, in f's units, signed
    cross_attention: np.ndarray  # (S,) cross-attention from position t, the mean of every layer and head
    notices: list[str]

    @property
    def difference(self) -> float:
        return self.probability - self.foil_probability

    @property
    def normalized(self) -> np.ndarray:
        """attribution over the sum of its absolute values (zeros stay zeros)."""
        total = np.abs(self.attribution).sum()
        return self.attribution / total if total > 0 else np.zeros_like(self.attribution)


def candidate(tokenizer: Any, value: str | int, what: str) -> tuple[int, list[str]]:
    """A candidate as a token id: an id, a token as the vocabulary writes it ("▁dogs", "<eos>"), or a word, which
    is encoded and its first piece taken (a notice says so when it has more). <pad> and <bos> are never written."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 2 <= value < tokenizer.vocab_size:
            raise ValueError(f"{what} id must be from 2 (<eos>) to {tokenizer.vocab_size - 1}; got {value}")
        return value, []
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a word, a token or a token id; got {value!r}")
    exact = tokenizer.hf.token_to_id(value) if value.startswith(("▁", "<")) else None
    if exact is not None and exact >= 2:
        return exact, []
    ids = tokenizer.encode(value.strip())
    if not ids:
        raise ValueError(f"{what} {value!r} has no tokens")
    pieces = tokenizer.tokens(ids)
    notices = [] if len(ids) == 1 else [f"{what} {value.strip()!r} is {len(ids)} tokens ({' '.join(pieces)}): "
                                        f"its first, {pieces[0]!r}, is compared"]
    return ids[0], notices


def contrast(bundle: Any, source: str, position: int, foil: str | int, *,
             target: str | Sequence[int] | None = None, token: str | int | None = None,
             objective: str = "probability", method: str = "grad_x_input", steps: int = 32,
             options: DecodeOptions = GREEDY) -> Contrast:
    """Why target's token at position (from 0; None target: the model's own translation by options) and not foil.
    token: another candidate a than the target's own token there; objective: "probability" or "logit"; method:
    "grad_x_input" or "integrated_gradients" (steps points, the midpoint rule)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if method not in METHODS:
        raise ValueError(f"unknown attribution method {method!r}; allowed: {', '.join(METHODS)}")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1; got {steps!r}")
    model, tokenizer = bundle.model, target_tokenizer(bundle)
    if target is None:
        target = translate_detailed(bundle, [source], options)[0].ids
    pair = prepare_pair(bundle, source, target)
    if pair.empty:
        raise ValueError("the source is empty: there is nothing to attribute")
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < len(pair.tgt):
        raise ValueError(f"position must be from 0 to {len(pair.tgt) - 1} (the target's {len(pair.tgt)} tokens, "
                         f"<eos> last); got {position!r}")
    a, notices = (pair.tgt[position], []) if token is None else candidate(tokenizer, token, "token")
    b, foil_notices = candidate(tokenizer, foil, "foil")

    def difference(hidden: torch.Tensor) -> torch.Tensor:  # (points, T, d_model) -> (points,)
        logits = model.project(hidden[:, position]).float()
        f = torch.softmax(logits, dim=-1) if objective == "probability" else logits
        return f[:, a] - f[:, b]

    alphas = [1.0] if method == "grad_x_input" else [(k + 0.5) / steps for k in range(steps)]
    attribution = embedding_attribution(model, pair.src, pair.tgt_in, difference, alphas)
    with inference(model):
        device = model.generator.weight.device
        hidden = model.hidden(torch.tensor([pair.src], device=device), torch.tensor([pair.tgt_in], device=device))
        p = torch.softmax(model.project(hidden[position]).float(), dim=-1)
    cross = attention_maps(model, pair.src, pair.tgt_in)["cross"][:, :, position].mean(dim=(0, 1))
    return Contrast(pair.source_tokens, pair.tokens, position, tokenizer.tokens([a])[0], tokenizer.tokens([b])[0],
                    float(p[a]), float(p[b]), objective, method, attribution, cross.double().numpy(),
                    pair.notices + notices + foil_notices)
