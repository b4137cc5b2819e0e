"""Named training recipes: a corpus, a model preset (section 6.2's sizes, core/model/config.py) and section 5's
training settings chosen together for one purpose, so a lecturer or a script asks for them by name
(`train_cli.py train --recipe NAME`, the studio's Train tab) instead of a dozen options.

"lecture-multi30k" trains a real De->En translator while a lecture explains section 3: the small preset
on Multi30k in bf16 on a GPU, token batches sized for it (5.1), a short warm-up of fairseq's inverse
square root schedule (5.3) and evaluations often enough to watch BLEU rise. Its aim (issue 45): >= 36
sacreBLEU on test_2016 (greedy) within 3 minutes of training on one H100 (bench/lecture_gpu.py).

Every recipe's precision is --amp auto's (core/training/acceleration.py resolve_amp): bf16 on a GPU and on
CPUs with native bf16, fp32 elsewhere, where emulated bf16 is several times slower than fp32.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..model.config import PRESETS
from .train_config import TrainConfig

# Beside the repository, where this project's data lives (README: Set up); a device machine's copy
# travels inside the checkout, in shared/data (docs/gpu.md).
REPOSITORY = Path(__file__).resolve().parents[2]
DATA_ROOTS = (REPOSITORY / "shared" / "data", REPOSITORY.parent / "shared" / "data")


def data_folder(name: str) -> Path:
    """The first of DATA_ROOTS holding the corpus folder `name` (the last one if none does, for the message)."""
    return next((root / name for root in DATA_ROOTS if (root / name).is_dir()), DATA_ROOTS[-1] / name)


@dataclass(frozen=True)
class Recipe:
    """What a recipe fixes; every key of `train` is a TrainConfig field. Frozen (recipes are shared): use
    train_config() and settings(), which copy, rather than changing `train` in place."""

    name: str
    summary: str  # what it trains, one line
    duration: str  # how long it takes, and on what: the one statement of it (--help, the README quote it)
    corpus: str  # a folder name under the data roots, read as files:FOLDER (or FOLDER/FILE:LANG1-LANG2)
    src_lang: str
    tgt_lang: str
    preset: str
    vocab_size: int
    model: dict[str, Any] = field(default_factory=dict)  # the preset's sizes changed, named as train's options
    train: dict[str, Any] = field(default_factory=dict)
    attention_every: int = 10  # the studio's attention timeline: steps between snapshots of the example's map
    both_directions: bool = False  # one model for src->tgt and tgt->src, sources tagged (core/data/directions.py)
    also_corpus: str | None = None  # a second corpus folder whose training pairs join (core/data/mixture.py)
    sized_for_gpu: bool = False  # on a CPU, train_cli says so at the start: its steps take seconds each there

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"recipe {self.name}: unknown preset {self.preset!r}")
        TrainConfig(**self.train)  # a typo in a recipe fails at import, not in a lecture

    @property
    def description(self) -> str:
        """One line for lists and --help: what the recipe trains, and how long it takes."""
        return f"{self.summary}; {self.duration}"

    @property
    def data(self) -> str:
        """The corpus as a core.data.files spec."""
        folder, slash, file = self.corpus.partition("/")
        return f"files:{data_folder(folder)}{slash}{file}"

    @property
    def also_train_on(self) -> str | None:
        """The second corpus as a core.data.files spec, if the recipe has one."""
        return f"files:{data_folder(self.also_corpus)}" if self.also_corpus else None

    def train_config(self, **overrides: Any) -> TrainConfig:
        """The recipe's TrainConfig; overrides (TrainConfig fields) win over the recipe's values."""
        known = {f.name for f in fields(TrainConfig)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s) {unknown}; allowed: {sorted(known)}")
        return TrainConfig(**{**self.train, **overrides})

    def settings(self) -> dict[str, Any]:
        """Everything the recipe sets, flat, for a UI to show."""
        return {"data": self.data, **({"also_train_on": self.also_train_on} if self.also_corpus else {}),
                "src_lang": self.src_lang, "tgt_lang": self.tgt_lang, "preset": self.preset,
                "vocab_size": self.vocab_size, **self.model,
                **({"both_directions": True} if self.both_directions else {}), **self.train,
                "attention_every": self.attention_every}


LECTURE_MULTI30K = Recipe(
    name="lecture-multi30k",
    summary="Multi30k De→En, small preset, sized for a GPU: a real translator while a lecture goes on",
    duration="aimed at 3 min on one H100 (bench/lecture_gpu.py); hours on a CPU: 1,200 steps of ~11 s in bf16 "
             "on a busy 2-core Zen 4",
    corpus="multi30k", src_lang="de", tgt_lang="en", preset="small", vocab_size=8000, sized_for_gpu=True,
    train=dict(
        # 12k padded slots a side: ~7.6k target tokens a step in buckets of 8, 56 steps an epoch of Multi30k's
        # 29k pairs; 1,200 steps are ~21 epochs (the shipped small model: 1,600 steps of 4k, ~14 epochs, 37.0
        # BLEU greedy).
        max_tokens=12288, max_steps=1200,
        # Larger batches than the paper's base recipe per parameter allow a higher peak; a short warm-up
        # because the whole run is short, clipping because a lecture cannot restart a diverged run.
        schedule="inverse_sqrt", peak_lr=2e-3, warmup=300, clip_norm=1.0, label_smoothing=0.1,
        # No host sync per step: batches padded to multiples of 8 train on the grid, figures read every 10.
        bucket=8, readback_every=10,
        eval_every=200, bleu_sentences=200),
    attention_every=50,
)


def _tatoeba_en_es(name: str, src_lang: str, tgt_lang: str) -> Recipe:
    """Seed 004's English<->Spanish system on Tatoeba (checkpoints/tatoeba-en-es/README.md says where it departs
    from the seed and why): one model for both directions, src_lang -> tgt_lang its first."""
    return Recipe(
        name=name, summary=f"Tatoeba {src_lang}↔{tgt_lang}, one model both ways (seed 004)",
        duration="~6.5 h for 14,000 steps on one thread of a 2-core Zen 4 CPU",
        corpus="tatoeba-spa-eng/spa-eng.tsv.gz:en-es", src_lang=src_lang, tgt_lang=tgt_lang,
        # Seed 004: 4+4 layers, d_model 256, 4 heads, d_ff 1024, post-norm, sinusoids; a vocabulary of 8k, not
        # 16k (Tatoeba's everyday sentences need fewer pieces, and the weights stay under 10 MB a shard).
        preset="small", vocab_size=8000, model=dict(layers=4), both_directions=True,
        train=dict(
            # Noam (eq. 3) with warm-up in steps, ~2.5 epochs of 4k-token batches (seed 004: "2 x steps/epoch");
            # Adam (0.9, 0.98, 1e-9), label smoothing 0.1, clipping at 1.0 as the seed does.
            max_tokens=4096, max_steps=14000, schedule="noam", warmup=1600, clip_norm=1.0, label_smoothing=0.1,
            eval_every=1000, bleu_sentences=300),
    )


TATOEBA_EN_ES = _tatoeba_en_es("tatoeba-en-es", "en", "es")
TATOEBA_ES_EN = _tatoeba_en_es("tatoeba-es-en", "es", "en")

# The general German<->English model (issue 61; checkpoints/README.md says where it departs from seed 000 and
# the paper, and why): what people type (all of Tatoeba's 168k pairs) and the lesson's captions (Multi30k's
# 29k training pairs), one model both ways, validated and tested on Tatoeba's carved splits.
TATOEBA_DE_EN = Recipe(
    name="tatoeba-de-en",
    summary="Tatoeba (168k pairs) + Multi30k captions, German↔English, one model both ways",
    duration="~12 h for 20,000 steps (~2.2 s a step, bf16; twice that beside other work) on one thread of a "
             "2-core Zen 4 CPU",
    corpus="tatoeba-deu-eng/deu-eng-full.tsv.gz:en-de", src_lang="de", tgt_lang="en", also_corpus="multi30k",
    # Seed 004's 4+4 layers of the small preset; seed 000's vocabulary of 10k (German compounds need more
    # pieces than Spanish).
    preset="small", vocab_size=10000, model=dict(layers=4), both_directions=True,
    train=dict(
        # As tatoeba-en-es: eq. 3 with 1,600 warm-up steps (its rate does not depend on the run's length, so a
        # run stopped early, or lengthened on --resume, follows the same curve), ~3.3k target tokens a step,
        # ~1,200 steps an epoch of both corpora both ways.
        max_tokens=4096, max_steps=20000, schedule="noam", warmup=1600, clip_norm=1.0, label_smoothing=0.1,
        eval_every=1000, bleu_sentences=300),
)
RECIPES: dict[str, Recipe] = {r.name: r for r in (LECTURE_MULTI30K, TATOEBA_EN_ES, TATOEBA_ES_EN, TATOEBA_DE_EN)}


def get_recipe(name: str) -> Recipe:
    """The recipe called name; ValueError listing the known ones."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return RECIPES[name]


def list_recipes() -> list[dict[str, Any]]:
    """Every recipe as {name, description, settings}: what the studio's Train tab offers."""
    return [{"name": r.name, "description": r.description, "settings": r.settings()} for r in RECIPES.values()]
