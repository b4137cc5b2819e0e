"""The lecture recipe (core/training/recipes.py, "lecture-multi30k") trained on Multi30k De->En on a CUDA GPU for
a budget of training time (3 minutes), its greedy sacreBLEU on test_2016_flickr taken about every 20 s:
the curve of BLEU against training time that issue 45 asks for (>= 36 within 3 minutes on one H100).

Evaluation stops the clock: the device is synchronised, the training time so far recorded, the test set
decoded (greedy, the whole of test_2016), and the clock starts again, so the budget and the curve's time
axis count training alone; the wall time with evaluations is recorded beside it. (The studio's Train tab
evaluates on its training thread too; a live run spends that time on top.)

    python bench/lecture_gpu.py [--seconds 180] [--every 20] [--out gpu-out]   # lecture.csv, lecture.png
    python bench/lecture_gpu.py --cpu-smoke --out /tmp/x     # tiny preset, synthetic data, a few seconds on the CPU
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from core.bundle import new_bundle  # noqa: E402
from core.data.batching import encode_pairs  # noqa: E402
from core.data.files import load_corpus  # noqa: E402
from core.data.tasks import make_task  # noqa: E402
from core.inference.translation import translate_detailed  # noqa: E402
from core.training.evaluation import evaluate_bleu  # noqa: E402
from core.training.recipes import get_recipe  # noqa: E402
from core.training.trainer import Trainer  # noqa: E402

GOAL_BLEU = 36.0
FIELDS = ("step", "train_seconds", "wall_seconds", "bleu", "loss", "tokens_per_s")


def greedy_bleu(trainer: Trainer, pairs: list[tuple[str, str]]) -> float:
    """Greedy sacreBLEU of the model as it is on pairs (translate_detailed: no warnings for a young model)."""
    bundle = trainer.bundle
    hypotheses = [t.text for t in translate_detailed(bundle, [s for s, _ in pairs], method="greedy")]
    return evaluate_bleu(hypotheses, [t for _, t in pairs]).bleu


def setup(args: argparse.Namespace) -> tuple[Trainer, list[tuple[str, str]]]:
    recipe = get_recipe("lecture-multi30k")
    if args.cpu_smoke:
        corpus = make_task("reverse", seed=0, n_train=400, n_valid=20, n_test=50)
        preset, kind, vocab = "tiny", "word", 100
        config = recipe.train_config(device="cpu", max_tokens=512, amp="off", warmup=30, peak_lr=5e-3)
    else:
        if not torch.cuda.is_available():
            sys.exit("this benchmark needs a CUDA GPU (or --cpu-smoke)")
        corpus = load_corpus(recipe.data, recipe.src_lang, recipe.tgt_lang)
        preset, kind, vocab = recipe.preset, "bpe", recipe.vocab_size
        config = recipe.train_config(device="cuda")
    torch.manual_seed(config.seed)
    bundle = new_bundle(corpus.train, preset, vocab_size=vocab, tokenizer_kind=kind)
    train, _ = encode_pairs(corpus.train, bundle.tokenizer, bundle.model.config.max_len)
    return Trainer(bundle, train, config), list(corpus.test)


def run(trainer: Trainer, test: list[tuple[str, str]], seconds: float, every: float) -> list[dict]:
    """Train for `seconds` of training time, evaluating every `every` of them (and at the end)."""
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
    rows, trained, wall_start, loss = [], 0.0, time.perf_counter(), float("nan")
    while trained < seconds and trainer.step_count < trainer.config.max_steps:
        sync()
        start = time.perf_counter()
        goal = min(seconds, trained + every)
        tokens = 0
        while trained + time.perf_counter() - start < goal and trainer.step_count < trainer.config.max_steps:
            event = trainer.step()
            tokens += event.tokens
            loss = event.loss if event.measured else loss
        sync()  # the queued steps belong to this segment's time
        segment = time.perf_counter() - start
        trained += segment
        rows.append({"step": trainer.step_count, "train_seconds": round(trained, 2),
                     "wall_seconds": round(time.perf_counter() - wall_start, 2), "bleu": greedy_bleu(trainer, test),
                     "loss": loss, "tokens_per_s": round(tokens / segment)})
        print("  " + "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in rows[-1].items()),
              flush=True)
    return rows


def write(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "lecture.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["train_seconds"] for r in rows], [r["bleu"] for r in rows], marker="o")
    ax.axhline(GOAL_BLEU, color="grey", linestyle="--", label=f"goal: {GOAL_BLEU:.0f} BLEU")
    ax.set(xlabel="training time (s), evaluations excluded", ylabel="sacreBLEU, test_2016 (greedy)",
           title="lecture-multi30k: De→En, small preset")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "lecture.png", dpi=120)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180.0, help="training time (evaluations excluded)")
    parser.add_argument("--every", type=float, default=20.0, help="training seconds between evaluations")
    parser.add_argument("--out", type=Path, default=Path("gpu-out"), help="folder for lecture.csv and lecture.png")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny preset on a synthetic task, on the CPU")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.seconds, args.every = min(args.seconds, 4.0), min(args.every, 2.0)
    trainer, test = setup(args)
    where = torch.cuda.get_device_name() if trainer.device.type == "cuda" else "CPU"
    print(f"{where}, torch {torch.__version__}: lecture-multi30k for {args.seconds:.0f} s of training, "
          f"{trainer.bundle.model.num_parameters() / 1e6:.1f}M parameters, {len(test)} test sentences")
    rows = run(trainer, test, args.seconds, args.every)
    write(rows, args.out)
    reached = next((r for r in rows if r["bleu"] >= GOAL_BLEU), None)
    print(f"best BLEU {max(r['bleu'] for r in rows):.2f}; " + (
        f"{GOAL_BLEU:.0f} reached after {reached['train_seconds']:.0f} s of training (step {reached['step']})"
        if reached else f"{GOAL_BLEU:.0f} not reached") + f"; {args.out / 'lecture.csv'}, {args.out / 'lecture.png'}")
    return rows


if __name__ == "__main__":
    main()
