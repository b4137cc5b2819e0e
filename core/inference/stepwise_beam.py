"""Step-through beam search for one sentence (the studio's beam explorer).

Section 6.1 of the paper decodes with "beam search with a beam size of 4 and length
penalty α = 0.6", GNMT's lp(Y) = ((5 + |Y|)/6)^α (Wu et al. 2016). ``BeamStepper`` runs
exactly the one-shot search of core.inference.beam_search: both call its ``beam_step``, so once
it is done (run_to_end()), hypotheses() returns the same hypotheses and scores as
``beam_search(..., n_best=beam_size)``.

Each step the 2·beam best expansions (hypothesis + next token, by cumulative log-probability)
are considered; among the best ``beam`` of them those ending in eos finish, and the ``beam``
best others stay live; the rest are pruned. A view of every step is kept, so back() is free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .beam_search import FINISHED, LIVE, PRUNED, BeamState, StepRecord, beam_start, beam_step, check_beam_fits, ranked
from .options import DecodeOptions, resolve_options
from .step_rules import length_penalty
from .steps import Hypothesis, copy_cache, inference, last_tokens
from .translation import max_output_length, prepare_source, target_tokenizer, toward

STATUS = {PRUNED: "pruned", LIVE: "live", FINISHED: "finished"}


@dataclass(frozen=True)
class HypothesisView:
    ids: list[int]        # generated ids (the last is eos for a finished hypothesis)
    tokens: list[str]
    logprob: float        # cumulative log-probability
    score: float          # logprob / lp(len(ids)), the length-normalised score beams are ranked by at the end
    # Per decoder layer, (heads, S): the cross-attention over the source when its newest token
    # was chosen (None before the first step).
    cross_attention: list[torch.Tensor] | None = field(compare=False)


@dataclass(frozen=True)
class Candidate:
    parent: int           # index into the previous step's live hypotheses
    token_id: int
    token: str
    token_logprob: float
    logprob: float        # parent's logprob + token_logprob
    score: float          # logprob / lp(parent length + 1)
    status: str           # "live", "finished" or "pruned" (live ones too once the search is done)


@dataclass(frozen=True)
class StepView:
    step: int                       # output tokens generated so far
    live: list[HypothesisView]      # best first
    # The 2·beam considered this step (those with a finite logprob), best first; [] at step 0.
    candidates: list[Candidate]
    finished: list[HypothesisView]  # best score first
    done: bool
    explanation: str


class BeamStepper:
    """Beam search on one sentence, one step at a time: step(), back(), reset(), run_to_end()."""

    def __init__(self, bundle: Any, text: str, options: DecodeOptions | None = None, **overrides: Any):
        # The tokenizer of the outputs it shows (the target's, with separate vocabularies); the source is read
        # with bundle.tokenizer, bound to a direction when the model serves two.
        bundle = toward(bundle, None)
        self.model, self.tokenizer = bundle.model, target_tokenizer(bundle)
        self.options = resolve_options(options, {"method": "beam", **overrides})
        check_beam_fits(self.model, self.options)
        max_len = self.model.config.max_len
        self.source = prepare_source(bundle.tokenizer, text, max_len, getattr(bundle, "info", None))
        self.max_output, clamp = max_output_length(len(self.source.ids), self.options, max_len)
        self.notices = self.source.notices + ([clamp] if clamp and not self.source.empty else [])
        self.reset()

    # ----- navigation ------------------------------------------------------------------
    def reset(self) -> StepView:
        self._history: list[tuple[BeamState | None, StepView]] = [self._start()]
        return self.view

    def step(self) -> StepView:
        """Advance one token (no-op once done)."""
        state, view = self._history[-1]
        if not view.done:
            with inference(self.model):
                attention = self._attention(state)
                new_state, record = beam_step(self.model, state, self.options)
            self._history.append((new_state, self._view(state, new_state, record, attention, view)))
        return self.view

    def back(self) -> StepView:
        """Rewind one step (no-op at the start)."""
        if len(self._history) > 1:
            self._history.pop()
        return self.view

    def run_to_end(self) -> StepView:
        while not self.done:
            self.step()
        return self.view

    @property
    def view(self) -> StepView:
        return self._history[-1][1]

    @property
    def done(self) -> bool:
        return self.view.done

    @property
    def source_tokens(self) -> list[str]:
        return self.source.tokens

    def hypotheses(self) -> list[Hypothesis]:
        """The finished hypotheses so far, best first (after run_to_end(): beam_search's n-best)."""
        state = self._history[-1][0]
        return ranked(state.finished[0]) if state else []

    # ----- internals ------------------------------------------------------------------
    def _start(self) -> tuple[BeamState | None, StepView]:
        if self.source.empty:
            return None, StepView(0, [], [], [], True, "Empty input: nothing to translate.")
        device = next(self.model.parameters()).device
        src = torch.tensor([self.source.ids], device=device)
        with inference(self.model):
            state = beam_start(self.model, src, torch.tensor([self.max_output], device=device))
        root = HypothesisView([], [], 0.0, 0.0, None)
        k = self.options.beam_size
        return state, StepView(0, [root], [], [], False,
                               f"Start: one empty hypothesis. Each step considers the top 2·beam = {2 * k} "
                               f"expansions; at most {self.max_output} output tokens.")

    def _attention(self, state: BeamState) -> list[torch.Tensor]:
        """Per layer (K, heads, S) cross-attention of the live rows while choosing the next token.
        A separate pass on a copy of the cache: the search itself runs exactly as in one-shot
        beam search (the fused attention kernel, no weights)."""
        _, cross = self.model.decode_step(last_tokens(self.model, state.tokens), copy_cache(state.cache),
                                          need_weights=True)
        return cross

    def _view(self, old: BeamState, new: BeamState, record: StepRecord, attention: list[torch.Tensor],
              previous: StepView) -> StepView:
        step = old.tokens.size(1) + 1
        penalty = length_penalty(step, self.options)
        candidates = self._candidates(record, new.done, penalty)  # finite ones: a prefix of the record's

        def hypothesis(ids: list[int], logprob: float, j: int) -> HypothesisView:
            attn = [layer[candidates[j].parent] for layer in attention]
            return HypothesisView(ids, self.tokenizer.tokens(ids), logprob, logprob / penalty, attn)

        new_finished = [hypothesis(old.tokens[c.parent].tolist() + [c.token_id], c.logprob, j)
                        for j, c in enumerate(candidates) if c.status == "finished"]
        live = [] if new.done else [hypothesis(new.tokens[row].tolist(), candidates[j].logprob, j)
                                    for row, j in enumerate(record.live[0].tolist()) if j < len(candidates)]
        finished = sorted(previous.finished + new_finished, key=lambda h: -h.score)
        return StepView(step, live, candidates, finished, new.done,
                        self._explain(step, candidates, new_finished, new.done))

    def _candidates(self, record: StepRecord, done: bool, penalty: float) -> list[Candidate]:
        rows = zip(record.parents[0].tolist(), record.tokens[0].tolist(), record.token_logprobs[0].tolist(),
                   record.logprobs[0].tolist(), record.status[0].tolist())
        return [Candidate(parent, tok, self.tokenizer.tokens([tok])[0], tok_lp, lp, lp / penalty,
                          STATUS[PRUNED if done and status == LIVE else status])
                for parent, tok, tok_lp, lp, status in rows if lp > float("-inf")]

    def _explain(self, step: int, candidates: list[Candidate], new_finished: list[HypothesisView], done: bool) -> str:
        k = self.options.beam_size
        live = sum(c.status == "live" for c in candidates)  # at most beam; finished ones leave the beam
        pruned = len(candidates) - live - len(new_finished)
        text = (f"Step {step}: considered the top 2·beam = {2 * k} expansions (by cumulative log-probability); "
                f"{live} stay live, {len(new_finished)} finished with <eos>, {pruned} pruned.")
        if done and step >= self.max_output:
            text += f" Done: reached the maximum output length ({self.max_output}; <eos> forced)."
        elif done:
            finished = "1 hypothesis has" if k == 1 else f"{k} hypotheses have"
            text += f" Done early: {finished} finished (or none can continue)."
        return text
