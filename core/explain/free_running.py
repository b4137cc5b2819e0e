"""Teacher forcing against free running: how the model is trained, and how it translates.

Training (section 5) and scoring feed the decoder the reference's words as its prefix ("teacher forcing");
translating, the decoder reads its own earlier choices (section 3: "consuming the previously generated symbols as
additional input"). Once its own words leave the reference's, every later word is predicted from a prefix no
reference ever gave it: exposure bias (Ranzato et al., 2016, "Sequence Level Training with Recurrent Neural
Networks"). Here one reference is scored both ways, side by side: each of its tokens given the reference's own
prefix, and given the model's greedy prefix; where the two prefixes first part, and what the model said there.
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

GREEDY = DecodeOptions(method="greedy")


@dataclass
class FreeRunning:
    """One reference, scored after its own prefix and after the model's greedy prefix. Position t predicts
    reference[t]; both arrays hold its probability, NaN where the greedy output had ended before t."""

    source_tokens: list[str]       # as the encoder reads them, "<eos>" last
    reference: list[str]           # the reference's tokens, "<eos>" last
    greedy: list[str]              # the model's greedy output, "<eos>" last
    forced: np.ndarray             # (len(reference),) P(reference[t] | reference[:t], x): teacher forcing
    forced_choice: list[str]       # the model's top token after reference[:t]
    free: np.ndarray               # (len(reference),) P(reference[t] | greedy[:t], x): free running
    diverges_at: int | None        # the first t where greedy[t] is not reference[t]; None: the same output
    notices: list[str]

    @property
    def said_there(self) -> str | None:
        """What the model wrote where its output first left the reference (None: it never did)."""
        if self.diverges_at is None:
            return None
        return self.greedy[self.diverges_at] if self.diverges_at < len(self.greedy) else None

    @property
    def log_probabilities(self) -> tuple[float, float]:
        """log P of the reference's tokens, summed, after its own prefix and after the model's, as far as the
        model's output went (NaN terms left out of the second)."""
        return float(np.log(self.forced).sum()), float(np.nansum(np.log(self.free)))


def free_running(bundle: Any, source: str, reference: str | Sequence[int], options: DecodeOptions = GREEDY
                 ) -> FreeRunning:
    """reference (text, or ids without <eos>) scored after its own prefix and after the model's output by options
    (greedy by default). With the model's own greedy output as the reference there is no divergence, and the two
    scores are one."""
    model, tokenizer = bundle.model, target_tokenizer(bundle)
    pair = prepare_pair(bundle, source, reference)
    if pair.empty:
        raise ValueError("the source is empty: there is nothing to translate or score")
    output = translate_detailed(bundle, [source], options)[0].ids + [model.config.eos_id]
    forced = _next_token_log_probs(model, pair.src, pair.tgt_in)                    # after reference[:t]
    own = _next_token_log_probs(model, pair.src, [model.config.bos_id] + output[:-1])  # after output[:t]
    ref = torch.tensor(pair.tgt)
    free = torch.full((len(pair.tgt),), -math.inf)
    reach = min(len(pair.tgt), len(output))
    free[:reach] = own[torch.arange(reach), ref[:reach]]
    free = free.exp().double().numpy()
    free[reach:] = math.nan
    differ = [t for t in range(max(len(pair.tgt), len(output)))
              if t >= len(output) or t >= len(pair.tgt) or output[t] != pair.tgt[t]]
    return FreeRunning(pair.source_tokens, pair.tokens, tokenizer.tokens(output),
                       forced[torch.arange(len(pair.tgt)), ref].exp().double().numpy(),
                       tokenizer.tokens(forced.argmax(dim=-1).tolist()), free, differ[0] if differ else None,
                       pair.notices)


def _next_token_log_probs(model: Any, src: list[int], tgt_in: list[int]) -> torch.Tensor:
    """(T, V) float32: log P(next token | tgt_in[:t + 1], src), one teacher-forced pass; <pad> and <bos>, which
    no decoder writes, at -inf."""
    device = model.generator.weight.device
    with inference(model):
        logits = model(torch.tensor([src], device=device), torch.tensor([tgt_in], device=device))[0]
        log_probs = torch.log_softmax(logits.float(), dim=-1)
    log_probs = log_probs.cpu().clone()  # out of inference mode, to be written into
    log_probs[:, [model.config.pad_id, model.config.bos_id]] = -math.inf
    return log_probs
