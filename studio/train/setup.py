"""The Train tab's run, set up: the set-up panel's Settings, the studio's size limits checked on them,
core.training.prepare's preparation of the corpus, vocabulary, model and trainer, and core's notes put in the
studio's words. No Gradio here; studio.train.job runs what this prepares.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import torch

from core.bundle import parameter_count, resolve_device
from core.data.tokenizer import BOS_ID
from core.explain.hooks import attention_maps
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from core.training.keep_best import check_keep_best
from core.training.prepare import RunNotes, RunPlan, learn_tokenizers, prepare_run
from core.training.trainer import TrainConfig, Trainer

from ..server import limits
from .sources import check_hf_cached, in_users_words

# The set-up panel's names for the model's fields, in messages from core's checks.
FORM_NAMES = {"n_heads": "heads", "encoder_layers": "layers", "decoder_layers": "layers",
              "src_vocab_size": "vocabulary", "tgt_vocab_size": "vocabulary", "keep_best": "keep best",
              "eval_every": "evaluate every", "max_len": "the longest sentence (max_len)"}
EVAL_SENTENCES = 100  # validation sentences decoded (greedy) at each evaluation
SAMPLES_SHOWN = 5


@dataclass
class Settings:
    """Everything the set-up panel chooses. The defaults are the lecture run: the `numbers`
    task (its cross-attention crosses: "4 2" -> "zwei und vierzig") on the tiny preset,
    >= 95% exact match on the test split in 300-350 steps, well under a minute on two
    busy CPU cores (bench/live_training.py)."""

    data: str = "synthetic:numbers"
    src_lang: str | None = None
    tgt_lang: str | None = None
    limit: int | None = None  # training pairs kept (None: all)
    name: str = "live-numbers"
    preset: str = "tiny"
    layers: int | None = None  # encoder and decoder layers; None: the preset's
    d_model: int | None = None
    n_heads: int | None = None
    d_ff: int | None = None
    dropout: float | None = None
    vocab_size: int = 8000  # subword vocabulary for real corpora (synthetic tasks use whole words)
    positional: str = "sinusoidal"  # section 3.5; "learned": Table 3's row E
    separate_vocab: bool = False  # one vocabulary per language (each of vocab_size at most), not section 3.4's one
    max_steps: int = 600
    max_tokens: int = 1024
    warmup: int = 100
    lr_factor: float = 0.5  # peak lr = 0.5 * 64^-0.5 * 100^-0.5 = 6.3e-3 with the tiny preset
    schedule: str = "noam"  # eq. 3; "inverse_sqrt" and "constant" take peak_lr instead of lr_factor
    peak_lr: float = 1e-3
    label_smoothing: float = 0.1
    clip_norm: float = 0.0
    eval_every: int = 50
    attention_every: int = 10
    keep_best: str | None = None  # core.training.keep_best's metric: the run also keeps its best evaluation's weights
    patience: int | None = None  # evaluations without a better keep_best metric before the run stops
    device: str = "auto"
    seed: int = 0

    def plan(self) -> RunPlan:
        """The run core.training.prepare prepares: whole words for a synthetic task, BPE for a real corpus."""
        return RunPlan(self.data, self.src_lang, self.tgt_lang, seed=self.seed, limit=self.limit, preset=self.preset,
                       model_overrides=self.model_overrides(), vocab_size=self.vocab_size,
                       separate_vocab=self.separate_vocab)

    def model_overrides(self) -> dict[str, Any]:
        chosen = {"encoder_layers": self.layers, "decoder_layers": self.layers, "d_model": self.d_model,
                  "n_heads": self.n_heads, "d_ff": self.d_ff, "dropout": self.dropout, "positional": self.positional}
        return {k: v for k, v in chosen.items() if v is not None}

    def train_config(self) -> TrainConfig:
        return TrainConfig(max_steps=self.max_steps, max_tokens=self.max_tokens, warmup=self.warmup,
                           lr_factor=self.lr_factor, schedule=self.schedule, peak_lr=self.peak_lr,
                           label_smoothing=self.label_smoothing, clip_norm=self.clip_norm,
                           device=self.device, seed=self.seed, eval_every=self.eval_every,
                           bleu_sentences=EVAL_SENTENCES, sample_translations=SAMPLES_SHOWN,
                           keep_best=self.keep_best, patience=self.patience)


@dataclass
class Prepared:
    """A run ready to train: its trainer, the sentence pair whose attention the tab follows, and facts."""

    trainer: Trainer
    example: tuple[list[int], list[int]]  # (source ids, decoder input ids), teacher-forced
    facts: dict[str, str]


def cross_attention(model: Transformer, src: list[int], tgt_in: list[int]) -> np.ndarray:
    """(layers, heads, target, source) cross-attention of one teacher-forced pair."""
    return attention_maps(model, src, tgt_in)["cross"].numpy()


def device_line(name: str = "auto") -> str:
    """Where training runs, in words."""
    device = resolve_device(name)
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)} (CUDA)"
    cores = os.cpu_count() or 1
    gpu = "no CUDA GPU found" if name == "auto" else "chosen"
    return f"CPU ({gpu}): {cores} cores, torch uses {torch.get_num_threads()} thread(s)"


def warm_up() -> None:
    """Import what the first Start would otherwise wait ~3 s for (every torch optimizer pulls
    in torch._dynamo on first use); the Train tab calls it when a page loads."""
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])


def check_size(settings: Settings, public: bool) -> None:
    """Refuse, before anything is read or built, a model above this studio's parameter limit (or not valid)."""
    try:
        planned = settings.plan().planned_config()
        params = parameter_count(planned)
        check_keep_best(settings.keep_best, settings.patience, eval_every=settings.eval_every,
                        bleu_sentences=EVAL_SENTENCES, synthetic=settings.data.startswith("synthetic:"))
    except ValueError as exc:  # ModelConfig's own check, e.g. d_model not divisible by the heads
        message = re.sub(r"\b(ModelConfig|TrainConfig)\.", "", str(exc))
        message = re.sub(r"\b(" + "|".join(FORM_NAMES) + r")\b", lambda m: FORM_NAMES[m[1]], message)
        raise ValueError(f"Cannot start: {message}") from None
    try:
        check_parameters(params, public)
        check_cost(planned, settings.max_tokens, public)
    except ValueError as exc:
        raise ValueError(f"Cannot start: {exc}") from None


def check_parameters(params: int, public: bool) -> None:
    """ValueError when a model of params parameters is above this studio's limit."""
    if public and params > limits.PUBLIC_MAX_PARAMETERS:
        raise ValueError(f"this public studio trains models of at most "
                         f"{limits.PUBLIC_MAX_PARAMETERS / 1e6:.0f}M parameters, and this one has "
                         f"{params / 1e6:,.1f}M. "
                         f"Choose the tiny or small preset (or smaller sizes), or run the studio on your own "
                         f"machine (README: Set up).")
    if params > limits.MAX_PARAMETERS:
        raise ValueError(f"this model has {params / 1e9:,.1f}B parameters; the studio trains at most "
                         f"{limits.MAX_PARAMETERS / 1e9:.0f}B (paper-big has 0.18B). Choose fewer layers or a "
                         f"smaller d_model or d_ff.")


def check_cost(config: ModelConfig, tokens: int, public: bool) -> None:
    """ValueError when, on a public studio, a step of config's model on batches of tokens tokens costs more than
    limits.PUBLIC_MAX_STEP_S, or it has more than limits.PUBLIC_MAX_LAYERS layers a stack (a 6,000-layer model of
    0.3M parameters took 27 s a step)."""
    refusal = limits.public_cost_refusal(config, tokens) if public else None
    if refusal:
        raise ValueError(f"{refusal}. Choose the tiny or small preset, or run the studio on your own machine "
                         f"(README: Set up).")


def vocabulary_notice(notes: RunNotes, vocab_size: int) -> str:
    """A notice that the vocabulary (vocab_size entries) leaves much of the training data <unk>; '' when
    it does not."""
    if not notes.many_unknown:
        return ""
    # Words seen once are not taken in by a larger vocabulary (core.data.batching.unknown_from_rare_words).
    why = ("They are words seen only once in the training data." if notes.unknown_from_rare_words else
           "Stop it and give a larger vocabulary.")
    return (f"{notes.unknown_share:.0%} of the training tokens are <unk>: a vocabulary of {vocab_size:,} does not "
            f"cover this data, and the model would learn to write <unk>. {why}")


def data_notice(notes: RunNotes) -> str:
    """A notice of pairs left out for an empty side, and of too few training pairs to learn from; '' when
    neither."""
    empty = notes.dropped_empty
    parts = [f"{empty[0].upper()}{empty[1:]}." if empty else ""]
    if notes.few_pairs:
        n = notes.training_pairs
        parts.append(f"Only {n:,} training pair{'s' * (n != 1)}: enough to learn them by heart, "
                     f"not to translate new sentences (the validation figures will stay low).")
    return in_users_words(" ".join(filter(None, parts)))


def cpu_notice(params: int, device: torch.device) -> str:
    """A notice that a model is large for live training on a CPU; '' when it is not."""
    if device.type != "cpu" or params <= limits.CPU_NOTICE_PARAMETERS:
        return ""
    small = parameter_count(ModelConfig.from_preset("small"))
    return (f"Large for a CPU: {params / 1e6:,.1f}M parameters, {params / small:,.0f}× the small preset "
            f"({small / 1e6:.1f}M). Every training step will take seconds, so the curves will move slowly; for a "
            f"live demonstration, stop it and choose fewer layers or a smaller d_model or d_ff.")


class PreparationStopped(Exception):
    """Stop was pressed, or the run's time ran out, while the run was being prepared."""


def prepare(settings: Settings, public: bool = False, check: Callable[[], None] = lambda: None) -> Prepared:
    """Corpus, tokenizer, model (checked to fit in memory first) and trainer for settings; the model built
    is checked against the limits again (public: PUBLIC_MAX_PARAMETERS) before a trainer allocates for it.
    check() between the stages (reading, learning the vocabulary, building) and, while the vocabulary is learnt,
    every 1,000 sentences it reads: it raises PreparationStopped once the run must stop (reading and building take
    no callback within them; a public corpus's caps keep them short)."""
    check_hf_cached(settings.data)
    # "train" as a saved checkpoint has it: the Model tab draws the live model's own lr schedule.
    info = {"name": settings.name, "train": asdict(settings.train_config())}

    def learn(corpus: Any, plan: RunPlan) -> Any:
        check()
        learnt = learn_tokenizers(corpus, plan, check)
        check()
        return learnt
    try:
        run = prepare_run(settings.plan(), max_tokens=settings.max_tokens, device=settings.device, info=info,
                          learn=learn)
    except ValueError as exc:
        raise ValueError(in_users_words(str(exc))) from None
    check()
    bundle, notes = run.bundle, run.notes
    # check_size saw the vocabulary asked for; the one learnt is what the model has (a tokenizer that
    # outgrew it would have let a "9-entry" vocabulary build a 26M-parameter model past --public's cap).
    check_parameters(bundle.model.num_parameters(), public)
    check_cost(bundle.model.config, settings.max_tokens, public)
    trainer = Trainer(bundle, run.train, settings.train_config(), valid_pairs=run.corpus.valid, valid=run.valid)
    max_len = bundle.model.config.max_len
    src, tgt = (bundle.tokenizer.encode(text)[: max_len - 1] for text in (run.corpus.test or run.corpus.valid)[0])
    example = (src + [bundle.model.config.eos_id], [BOS_ID] + tgt)  # the attention timeline's sentence
    params = bundle.model.num_parameters()
    notices = (cpu_notice(params, trainer.device), vocabulary_notice(notes, bundle.tokenizer.vocab_size),
               data_notice(notes))
    facts = {"parameters": f"{params:,}", "device": str(trainer.device),
             "notice": " ".join(filter(None, notices)),  # "" for most models
             "vocabulary": f"{bundle.tokenizer.vocab_size:,} ({bundle.tokenizer.kind})",
             "pairs": f"{notes.training_pairs:,} training, {notes.validation_pairs:,} validation"
                      + (f" ({notes.too_long:,} too long, left out)" if notes.too_long else "")}
    return Prepared(trainer, example, facts)
