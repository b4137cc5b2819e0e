"""Keeping the best model by a validation score, and early stopping.

The paper trains for a fixed number of steps and averages the last checkpoints (section 6.1), and
chose its variations by their score on the development set, newstest2013 (Table 3). On a small
corpus a model overfits long before the last step: the checkpoint to keep is the one with the best
validation score, and training may stop once that score has not improved for a while (patience).

``BestKeeper`` is the bookkeeping only: given each evaluation (the validation dict of
``Trainer.evaluate``) it says whether it is the best so far and whether patience has run out; the
trainer asks it, and a front end saves (or snapshots) the model when it says "best".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# metric -> (the validation dict's key, whether higher is better)
METRICS: dict[str, tuple[str, bool]] = {"bleu": ("bleu", True), "loss": ("val_loss", False),
                                        "exact_match": ("exact_match", True)}


def check_keep_best(metric: str | None, patience: int | None, *, eval_every: int, bleu_sentences: int,
                    synthetic: bool | None = None) -> None:
    """Refuse settings under which the metric is never measured: no evaluations, BLEU without decoded
    sentences, exact match on real text (synthetic None: not known yet). Errors name TrainConfig's fields."""
    check_patience(patience)
    if metric is None:
        if patience is not None:
            raise ValueError("TrainConfig.patience counts evaluations without a better TrainConfig.keep_best metric: "
                             "give one (bleu, loss or exact_match)")
        return
    if metric not in METRICS:
        raise ValueError(f"TrainConfig.keep_best {metric!r}; allowed: {', '.join(METRICS)}")
    if eval_every < 1:
        raise ValueError(f"TrainConfig.keep_best {metric} needs evaluations: TrainConfig.eval_every must be >= 1")
    if metric in ("bleu", "exact_match") and bleu_sentences < 1:
        raise ValueError(f"TrainConfig.keep_best {metric} scores decoded validation sentences: "
                         f"TrainConfig.bleu_sentences must be >= 1")
    if metric == "exact_match" and synthetic is False:
        raise ValueError("TrainConfig.keep_best exact_match is for synthetic tasks, whose outputs have one right "
                         "answer; on real text keep the best by bleu or loss")


def check_patience(patience: int | None) -> None:
    if patience is not None and (not isinstance(patience, int) or isinstance(patience, bool) or patience < 1):
        raise ValueError(f"TrainConfig.patience must be >= 1 (evaluations without improvement), got {patience!r}")


@dataclass
class BestKeeper:
    """Which evaluation was the best so far by one metric, and how many came after it."""

    metric: str = "bleu"
    patience: int | None = None  # evaluations without improvement before training should stop; None: never
    best: float | None = None
    best_step: int | None = None
    since_best: int = 0  # evaluations since the best

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r} to keep the best by; allowed: {', '.join(METRICS)}")
        check_patience(self.patience)

    def observe(self, step: int, validation: dict[str, Any]) -> bool:
        """Whether this evaluation (at optimizer step `step`) is the best so far. A tie is not better: the
        earlier checkpoint, reached with fewer steps, stays."""
        key, higher = METRICS[self.metric]
        if key not in validation:
            raise ValueError(f"the evaluation at step {step} has no {key} to keep the best by "
                             f"(it has {', '.join(sorted(validation)) or 'nothing'})")
        value = float(validation[key])
        if self.best is None or (value > self.best if higher else value < self.best):
            self.best, self.best_step, self.since_best = value, step, 0
            return True
        self.since_best += 1
        return False

    @property
    def exhausted(self) -> bool:
        """Whether patience has run out: that many evaluations in a row brought nothing better."""
        return self.patience is not None and self.since_best >= self.patience

    def record(self) -> dict[str, Any]:
        """What a checkpoint's config.json says of the best: {"metric", "value", "step"}."""
        return {"metric": self.metric, "value": self.best, "step": self.best_step}

    def describe(self) -> str:
        """"bleu 23.41 at step 2000", or that nothing was evaluated yet."""
        if self.best is None:
            return f"no {self.metric} measured yet"
        return f"{self.metric} {self.best:.4g} at step {self.best_step}"

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A resumed run's best so far; kept only if it was measured by the same metric (the patience is
        this run's setting)."""
        if state.get("metric") == self.metric:
            self.best, self.best_step, self.since_best = state["best"], state["best_step"], int(state["since_best"])
