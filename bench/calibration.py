"""Section 5.4's label smoothing claim on two checkpoints (issue 62): "This hurts perplexity, as the model learns
to be more unsure, but improves accuracy and BLEU score."

    python bench/calibration.py runs/table3/base/final runs/table3/D-nols/final [--sentences 1014] [--split valid]
                                [--figure docs/calibration.png]
    python bench/table3.py --only base,D-nols     # first, if those runs are gone: ~35 min each on one core

For each checkpoint on the first --sentences pairs of Multi30k's split (../shared/data/multi30k, in the model's
direction): its ε_ls (as config.json records it), the expected calibration error and the reliability bins of its
token probabilities (teacher forced), mean confidence, top-1 accuracy, perplexity and greedy BLEU
(core.explain.compare_calibration), then whether the claim holds between the two. --figure writes the Word choice
tab's reliability diagram of them (PNG through kaleido, or .html), titled with each one's perplexity and BLEU.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

import core  # noqa: E402
from core.data.files import load_corpus  # noqa: E402
from core.explain import compare_calibration  # noqa: E402

DATA = f"files:{ROOT.parent / 'shared' / 'data' / 'multi30k'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", type=Path, nargs="+", help="one or two checkpoint folders")
    parser.add_argument("--data", default=DATA, help=f"a core.data.files spec (default {DATA})")
    parser.add_argument("--split", default="valid", choices=("valid", "test", "train"))
    parser.add_argument("--sentences", type=int, default=1014)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--figure", type=Path, help="write the reliability diagram here (.png or .html)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundles = [core.load_checkpoint(path) for path in args.checkpoints]
    info = bundles[0].info
    corpus = load_corpus(args.data, info.get("src_lang"), info.get("tgt_lang"))
    pairs = getattr(corpus, args.split)[:args.sentences]
    started = time.perf_counter()
    compared = compare_calibration(bundles, pairs)
    print(f"{len(pairs)} pairs of {args.data} ({args.split}), {time.perf_counter() - started:.0f} s; load average "
          f"{os.getloadavg()[0]:.2f}")
    for path, c in zip(args.checkpoints, compared):
        r = c.calibration
        print(f"{path}: ε_ls {c.label_smoothing}; ECE {r.ece:.4f}, mean confidence {r.mean_confidence:.3f}, top-1 "
              f"{r.top1:.3f}, perplexity {r.perplexity:.2f}, BLEU {c.bleu.bleu:.2f} (greedy), over {r.tokens} tokens")
        print("  bins (confidence: accuracy, tokens): " + ", ".join(
            f"{lo:.1f}-{hi:.1f}: {acc:.2f} ({n})" for lo, hi, acc, n in zip(r.edges, r.edges[1:], r.accuracy, r.counts)
            if n))
    if len(compared) == 2 and None not in (compared[0].label_smoothing, compared[1].label_smoothing):
        smooth, plain = sorted(compared, key=lambda c: -c.label_smoothing)
        worse = smooth.calibration.perplexity > plain.calibration.perplexity
        better = smooth.bleu.bleu > plain.bleu.bleu
        holds = "holds" if worse and better else "does not hold"
        print(f"with smoothing: perplexity {'higher' if worse else 'not higher'}, BLEU "
              f"{'higher' if better else 'not higher'}: section 5.4's claim {holds} here")

    if args.figure:
        write_figure(args.figure, args.checkpoints, compared, len(pairs))


def write_figure(path: Path, checkpoints: list[Path], compared: list, pairs: int) -> None:
    from studio.plots.word_choice import reliability_diagram  # the studio's figure; plotly, no Gradio

    names = [f"{p.parent.name if p.name == 'final' else p.name} (ε_ls "
             f"{'not recorded' if c.label_smoothing is None else format(c.label_smoothing, 'g')})"
             for p, c in zip(checkpoints, compared)]
    summary = "; ".join(f"{n}: PPL {c.calibration.perplexity:.2f}, BLEU {c.bleu.bleu:.2f}"
                        for n, c in zip(names, compared))
    fig = reliability_diagram(list(zip(names, (c.calibration for c in compared))),
                              f"Label smoothing and calibration, {pairs} dev sentences<br>{summary}")
    fig.write_html(path) if path.suffix == ".html" else fig.write_image(path, width=900, height=560)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
