"""Our own Table 3 on Multi30k De->En: the `small` model and the paper's variations, each trained for
the same number of steps and scored on the development set as Table 3 is (dev perplexity and BLEU,
beam 4, no checkpoint averaging: section 6.2), beside the paper's own figures (newstest2013 dev).

Rows: A (1, 4 and 16 heads at constant compute, d_k = d_model / h), B (smaller d_k), C (a smaller and
a larger model), D (no dropout; no label smoothing), E (learned positions), pre-norm, and the base
again with a second seed (how far two seeds differ: what a difference must exceed to mean anything).

    python bench/table3.py                        # every run, in order; resumable (Ctrl-C, then again)
    python bench/table3.py --only base,E-learned  # a subset, by name or row (--only A)
    python bench/table3.py --dry-run              # the commands, not run
    python bench/table3.py --trial 20             # seconds per step of each variant, to plan the run
    python bench/table3.py --threads 1            # torch threads (a shared, busy CPU: 2 threads collapse)

    python bench/table3.py --results              # the table of the runs scored so far (no training)

Runs go to runs/table3/NAME/ (train_cli's run folders, with dev.json once scored). Each score is also kept
in docs/table3-scores/NAME.json (tracked, with its steps, batch tokens and peak scale), so a table cut short by a lost
machine goes on where it stopped; every scored run goes to docs/table3.csv, docs/table3-results.md and
docs/table3.png. docs/table3.md is the recipe.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = f"files:{ROOT.parent / 'shared' / 'data' / 'multi30k'}"
RUNS, DOCS = ROOT / "runs" / "table3", ROOT / "docs"
# About 15 minutes a run on one core of this machine (bf16 autocast, which train_cli's --amp auto takes on a CPU
# with AVX512-BF16; fp32 is 1.6x slower): 800 steps of 4096-token batches, about 6 epochs. Eq. 3's warm-up over
# the first half, its peak at a quarter of the shipped multi30k-de-en-small's (eq. 3's peak falls as warmup^-0.5:
# the factor keeps it there for any --steps). The base, 800 steps each (docs/table3.md): at the shipped peak,
# 2.2e-3, dev BLEU 6.4; at half of it, 1.1e-3, seed 0 reached 32.0 and seed 1 4.2 (its loss rose past the peak):
# at the edge of stability, two seeds 28 BLEU apart, where no variant's difference could mean anything.
STEPS, MAX_TOKENS, FULL_WARMUP, PEAK_SCALE = 800, 4096, 800, 0.25
COMMON = ["--src", "de", "--tgt", "en", "--preset", "small", "--eval-every", "0", "--keep-last", "1",
          "--save-every", "200"]


@dataclass(frozen=True)
class Variant:
    name: str
    row: str  # Table 3's row: base, A-E; "pre-norm" is not in the paper
    change: str  # what differs from base, in the paper's terms
    args: tuple[str, ...]  # train_cli options over COMMON
    paper: tuple[float, float] | None  # the paper's dev PPL and BLEU for the analogous change (paper, Table 3)


# The small model: N=3, d_model=256, d_ff=1024, h=4, d_k=d_v=64, P_drop=0.1, eps_ls=0.1.
# Paper, Table 3, newstest2013 dev (base: N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64): PPL, BLEU.
VARIANTS = [
    Variant("base", "base", "small: N=3, d_model=256, d_ff=1024, h=4, d_k=64", (), (4.92, 25.8)),
    Variant("base-seed1", "base", "base, second seed", ("--seed", "1"), (4.92, 25.8)),
    Variant("A-h1", "A", "h=1, d_k=d_v=256", ("--heads", "1"), (5.29, 24.9)),
    Variant("A-h16", "A", "h=16, d_k=d_v=16", ("--heads", "16"), (4.91, 25.8)),
    Variant("B-dk32", "B", "d_k=32", ("--d-k", "32"), (5.01, 25.4)),
    Variant("B-dk16", "B", "d_k=16", ("--d-k", "16"), (5.16, 25.1)),
    Variant("C-small", "C", "d_model=128, d_ff=512 (d_k=32)", ("--d-model", "128", "--d-ff", "512"), (5.75, 24.5)),
    Variant("C-large", "C", "d_model=512, d_ff=2048 (d_k=128)", ("--d-model", "512", "--d-ff", "2048"), (4.66, 26.0)),
    Variant("D-nodrop", "D", "P_drop=0.0", ("--dropout", "0"), (5.77, 24.6)),
    Variant("D-nols", "D", "eps_ls=0.0", ("--label-smoothing", "0"), (4.67, 25.3)),
    Variant("E-learned", "E", "learned positional embedding", ("--positional", "learned"), (4.92, 25.7)),
    Variant("pre-norm", "-", "pre-norm residuals (--norm-first)", ("--norm-first",), None),
]
PAPER_ROWS = """Paper's rows beside ours (paper, Table 3, newstest2013 dev; PPL per wordpiece, BLEU):
base 4.92/25.8; (A) h=1 5.29/24.9, h=4 5.00/25.5, h=16 4.91/25.8, h=32 5.01/25.4; (B) d_k=16 5.16/25.1,
d_k=32 5.01/25.4; (C) d_model=256 5.75/24.5, d_model=1024 4.66/26.0; (D) P_drop=0.0 5.77/24.6,
eps_ls=0.0 4.67/25.3; (E) positional embedding 4.92/25.7."""


def chosen(only: str | None) -> list[Variant]:
    if not only:
        return VARIANTS
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    rows = {"A", "B", "C", "D", "E"}
    unknown = wanted - {v.name for v in VARIANTS} - rows
    if unknown:
        raise SystemExit(f"table3.py: unknown variant(s) {sorted(unknown)}; names: "
                         f"{', '.join(v.name for v in VARIANTS)}; rows: {', '.join(sorted(rows))}")
    return [v for v in VARIANTS if v.name in wanted or v.row in wanted & rows]


def cli(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "train_cli.py"), *args]


def train_command(variant: Variant, steps: int, max_tokens: int = MAX_TOKENS) -> list[str]:
    """The run's command: a new run, or the rest of one cut short (train_cli --resume keeps its options)."""
    folder = RUNS / variant.name
    if any(folder.glob("step-*")):
        return cli("train", "--out", str(folder), "--resume")
    warmup = max(1, steps // 2)
    factor = PEAK_SCALE * math.sqrt(warmup / FULL_WARMUP)
    return cli("train", "--data", DATA, *COMMON, "--max-tokens", str(max_tokens), "--max-steps", str(steps),
               "--warmup", str(warmup), "--lr-factor", f"{factor:.4g}", *variant.args,
               "--out", str(folder))


def evaluate_command(variant: Variant) -> list[str]:
    return cli("evaluate", "--checkpoint", str(RUNS / variant.name / "final"), "--data", DATA, "--split", "valid",
               "--method", "beam", "--beam", "4")


def trained(variant: Variant, steps: int) -> bool:
    config = RUNS / variant.name / "final" / "config.json"
    return config.is_file() and json.loads(config.read_text()).get("step") == steps


def scores_of(variant: Variant) -> dict | None:
    """The variant's dev scores: scored in runs/ on this machine (and kept in docs/ now), or kept in docs/ by
    an earlier machine; None when it has not been scored."""
    kept, scored = DOCS / "table3-scores" / f"{variant.name}.json", RUNS / variant.name / "dev.json"
    if scored.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(scored.read_text())
    return json.loads(kept.read_text()) if kept.is_file() else None


def run_variant(variant: Variant, steps: int, max_tokens: int, env: dict[str, str]) -> None:
    """Train (or finish training) and score one variant."""
    folder = RUNS / variant.name
    scores = scores_of(variant)
    if scores and (scores["step"], scores.get("max_tokens"), scores.get("peak_scale")) == (steps, max_tokens,
                                                                                          PEAK_SCALE):
        print(f"{variant.name}: scored already ({steps} steps of {max_tokens} tokens, peak scale {PEAK_SCALE})")
        return
    if folder.is_dir() and not any(folder.glob("step-*")) and not trained(variant, steps):
        shutil.rmtree(folder)  # stopped before its first checkpoint: nothing to keep
    if not trained(variant, steps):
        folder.parent.mkdir(parents=True, exist_ok=True)  # the run's own folder is train_cli's to make
        with open(folder.parent / f"{variant.name}.log", "a") as log:  # runs side by side: a log each
            subprocess.run(train_command(variant, steps, max_tokens), cwd=ROOT, check=True, env=env, stdout=log,
                           stderr=subprocess.STDOUT)
    started = time.monotonic()
    result = subprocess.run(evaluate_command(variant), cwd=ROOT, check=True, capture_output=True, text=True, env=env)
    scores = parse_scores(result.stdout)
    final = json.loads((folder / "final" / "config.json").read_text())
    (folder / "dev.json").write_text(json.dumps({
        **scores, "eval_s": time.monotonic() - started, "step": final["step"], "seed": final["train"]["seed"],
        "max_tokens": final["train"]["max_tokens"], "peak_scale": PEAK_SCALE,
        "precision": trained_precision(folder.parent / f"{variant.name}.log"),
        "parameters": parameter_count(folder / "final"), "train_s": steps_seconds(folder / "metrics.jsonl")},
        indent=2))
    scores_of(variant)  # kept in docs/
    print(f"{variant.name}: dev BLEU {scores['bleu']:.2f}, PPL {scores['perplexity']:.2f}")


def steps_seconds(metrics: Path) -> float:
    """The training steps' time, from train_cli's metrics (each step's tokens over its tokens/s): unlike a clock
    around the command, it keeps the steps of a session that was cut off before the run was resumed."""
    steps = {}
    for line in metrics.read_text().splitlines():
        record = json.loads(line)
        steps[record["step"]] = record  # a step logged again after a resume: the resumed one
    return sum(r["tokens"] / r["tokens_per_s"] for r in steps.values() if r.get("tokens_per_s"))


def trained_precision(log: Path) -> str:
    """The arithmetic the run trained in, as train_cli's header says ("amp bf16"; "amp off": fp32)."""
    found = re.findall(r"\bamp (\w+)", log.read_text()) if log.is_file() else []
    return {"off": "fp32"}.get(found[-1], found[-1]) if found else "unknown"


def parse_scores(stdout: str) -> dict[str, float | str]:
    """BLEU, its signature, token accuracy and perplexity from train_cli evaluate's output."""
    bleu = re.search(r"^BLEU = ([\d.]+)\s+(\S+)", stdout, re.M)
    forced = re.search(r"^token accuracy = ([\d.]+)%\s+perplexity = ([\d.]+)", stdout, re.M)
    if not (bleu and forced):
        raise RuntimeError(f"evaluate printed no scores:\n{stdout}")
    return {"bleu": float(bleu[1]), "bleu_signature": bleu[2], "accuracy": float(forced[1]) / 100,
            "perplexity": float(forced[2])}


def parameter_count(checkpoint: Path) -> int:
    from core.bundle import parameter_count as count
    from core.checkpoint import read_config
    from core.model.config import ModelConfig

    return count(ModelConfig.from_dict(read_config(checkpoint)["model"]))


# ----- the results: CSV, markdown, plot ---------------------------------------------------------------
FIELDS = ["name", "row", "change", "seed", "step", "max_tokens", "parameters", "dev_perplexity", "dev_bleu",
          "dev_accuracy", "precision", "paper_perplexity", "paper_bleu", "train_s", "eval_s", "bleu_signature"]


def results() -> list[dict]:
    rows = []
    for variant in VARIANTS:
        scores = scores_of(variant)
        if scores is None:
            continue
        paper = variant.paper or (None, None)
        rows.append({"name": variant.name, "row": variant.row, "change": variant.change, "seed": scores["seed"],
                     "step": scores["step"], "max_tokens": scores.get("max_tokens", MAX_TOKENS),
                     "parameters": scores["parameters"],
                     "dev_perplexity": scores["perplexity"], "dev_bleu": scores["bleu"],
                     "dev_accuracy": scores["accuracy"], "precision": scores.get("precision", "unknown"),
                     "paper_perplexity": paper[0], "paper_bleu": paper[1],
                     "train_s": round(scores["train_s"]), "eval_s": round(scores["eval_s"]),
                     "bleu_signature": scores["bleu_signature"]})
    return rows


def write_results(rows: list[dict]) -> None:
    DOCS.mkdir(exist_ok=True)
    with open(DOCS / "table3.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (DOCS / "table3-results.md").write_text(markdown(rows))
    plot(rows, DOCS / "table3.png")
    print(f"wrote {DOCS / 'table3.csv'}, {DOCS / 'table3-results.md'} and {DOCS / 'table3.png'} "
          f"({len(rows)} of {len(VARIANTS)} variants scored)")


def markdown(rows: list[dict]) -> str:
    def number(value, digits: int) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    steps = rows[0]["step"] if rows else STEPS
    tokens = rows[0]["max_tokens"] if rows else MAX_TOKENS
    precision = " / ".join(sorted({r["precision"] for r in rows})) or "unknown"
    lines = ["# Table 3 on Multi30k De→En: results", "",
             f"Each run: {steps} steps of {tokens}-token batches in {precision} (warm-up over the first half, "
             f"eq. 3 peaking at {PEAK_SCALE:g} of the shipped model's learning rate), the last checkpoint (no "
             f"averaging), scored on Multi30k's dev split (1,014 sentences): perplexity per target token (teacher "
             f"forced, our 8k BPE) and "
             f"sacreBLEU with beam 4. Paper: Table 3, newstest2013 dev (PPL per wordpiece of its 37k BPE, BLEU); "
             f"absolute values do not compare across the two, the differences from each base do.", "",
             "| run | row | change | params | dev PPL | dev BLEU | paper PPL | paper BLEU | train |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['row']} | {r['change']} | {r['parameters'] / 1e6:.1f}M | "
                     f"{number(r['dev_perplexity'], 2)} | {number(r['dev_bleu'], 2)} | "
                     f"{number(r['paper_perplexity'], 2)} | {number(r['paper_bleu'], 1)} | "
                     f"{r['train_s'] / 60:.0f} min |")
    signature = rows[0]["bleu_signature"] if rows else ""
    return "\n".join(lines + ["", f"sacreBLEU signature: `{signature}`", "", PAPER_ROWS, ""])


def plot(rows: list[dict], path: Path) -> None:
    """Each variant's change from its base, ours beside the paper's: BLEU and perplexity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = next((r for r in rows if r["name"] == "base"), None)
    seed1 = next((r for r in rows if r["name"] == "base-seed1"), None)
    shown = [r for r in rows if r["name"] != "base"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * max(len(shown), 4) + 2.0), sharey=True)
    for ax, metric, title in ((axes[0], "bleu", "Δ dev BLEU vs base (higher is better)"),
                              (axes[1], "perplexity", "Δ dev PPL vs base (lower is better)")):
        names = [r["name"] for r in shown]
        ours = [r[f"dev_{metric}"] - base[f"dev_{metric}"] if base else 0.0 for r in shown]
        paper_base = VARIANTS[0].paper[0 if metric == "perplexity" else 1]
        paper = [(r[f"paper_{metric}"] - paper_base) if r[f"paper_{metric}"] is not None else 0.0 for r in shown]
        y = range(len(shown))
        if base and seed1:  # a difference inside the band is no bigger than two seeds of the same model differ
            spread = abs(seed1[f"dev_{metric}"] - base[f"dev_{metric}"])
            ax.axvspan(-spread, spread, color="#bbbbbb", alpha=0.35, label="within the two base seeds' spread")
        ax.barh([i - 0.2 for i in y], ours, height=0.4, label="ours (Multi30k dev)")
        ax.barh([i + 0.2 for i in y], paper, height=0.4, label="paper (newstest2013 dev)")
        ax.set_yticks(list(y), names)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(title)
        ax.invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)  # under both panels
    fig.suptitle("Table 3's variations of the small model on Multi30k De→En, against the paper's")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----- a trial: seconds per step -----------------------------------------------------------------------
def trial(variants: list[Variant], steps: int, threads: int | None) -> None:
    """Time `steps` training steps of each variant in this process (after two untimed ones), to estimate a
    whole run: the corpus is read and the vocabulary learnt once, as every variant shares them."""
    import torch

    from cli.args import build_parser
    from cli.train import run_plan, train_config
    from core.training.prepare import learn_tokenizers, prepare_run, read_corpus
    from core.training.trainer import Trainer

    if threads:
        torch.set_num_threads(threads)
    parser = build_parser()
    base = parser.parse_args(["train", "--data", DATA, *COMMON, "--max-steps", str(steps + 2), "--out", "unused"])
    shared = learn_tokenizers(read_corpus(run_plan(base)), run_plan(base))  # every variant's vocabulary
    print(f"torch threads {torch.get_num_threads()}; {steps} timed steps per variant; estimate for {STEPS} steps")
    print(f"{'variant':<12} {'params':>8} {'s/step':>7} {'estimate':>9}")
    for variant in variants:
        args = parser.parse_args(["train", "--data", DATA, *COMMON, "--max-steps", str(steps + 2), *variant.args,
                                  "--out", "unused"])
        # The run train_cli prepares of these options, with the shared vocabulary.
        run = prepare_run(run_plan(args), max_tokens=args.max_tokens, learn=lambda corpus, plan: shared)
        trainer = Trainer(run.bundle, run.train, train_config(args, run.train, 1, None), valid_pairs=run.corpus.valid,
                          valid=run.valid)
        bundle = run.bundle
        trainer.step(), trainer.step()  # untimed: first allocations
        started = time.perf_counter()
        for _ in range(steps):
            trainer.step()
        per_step = (time.perf_counter() - started) / steps
        print(f"{variant.name:<12} {bundle.model.num_parameters() / 1e6:>7.1f}M {per_step:>7.2f} "
              f"{per_step * STEPS / 60:>7.0f} min", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated variant names or rows (default: all)")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps of each run (warm-up: half)")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="padded tokens per batch")
    parser.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    parser.add_argument("--trial", type=int, metavar="N", help="time N steps of each variant instead")
    parser.add_argument("--results", action="store_true", help="write the table of the runs scored so far")
    parser.add_argument("--threads", type=int, help="torch threads of each run (default: torch's, one per core)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at a time, e.g. 2 with --threads 1 on two cores (default: 1)")
    args = parser.parse_args()
    variants = chosen(args.only)
    if args.trial:
        return trial(variants, args.trial, args.threads)
    if args.results:
        return write_results(results())
    env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
    if args.dry_run:
        for variant in variants:
            print(" ".join(train_command(variant, args.steps, args.max_tokens)))
            print(" ".join(evaluate_command(variant)))
        return
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:  # threads: each waits on a subprocess
        for done in [pool.submit(run_variant, v, args.steps, args.max_tokens, env) for v in variants]:
            done.result()  # a failed run stops the table with its error
    write_results(results())


if __name__ == "__main__":
    main()
