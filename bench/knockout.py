"""Why each part is there (issue 62): how long one sentence's views take, and a corpus knocked out.

    python bench/knockout.py [--runs 7] [--threads 1] [--sentences 100] [--checkpoint checkpoints/multi30k-de-en-small]

On the shipped model and "Zwei Hunde jagen eine Katze.", times core.explain's knockout_effect for every part
(translation before and after, the tokens scored both ways, the neighbouring attention before and after), the
logit lens, teacher forcing against free running and a contrast by integrated gradients, as the studio draws it
(the median of --runs runs after a warm-up);
then the first --sentences pairs of Multi30k's validation split (../shared/data/multi30k) knocked out, greedy
(corpus_effect: both translations and BLEU, chrF), and their calibration. Targets on 2 cores: one sentence's
knock-out or lens <= 0.5 s; 100 corpus sentences knocked out <= 15 s. Prints the CPU, torch's threads and the load
average before and after: a shared machine's other jobs slow every figure. One torch thread by default, as the
studio runs (`--threads 1`): on a busy 2-core machine two threads spin waiting for each other (2026-12-02, load
3.5-5: a knock-out took 1.1-11.6 s with 2 threads, 0.08-0.24 s with 1).
"""
from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

import core  # noqa: E402
from bench.explain import cpu_model, timed  # noqa: E402
from core.explain import (  # noqa: E402
    Knockout,
    calibration,
    contrast,
    corpus_effect,
    free_running,
    knockout_effect,
    logit_lens,
)

SOURCE = "Zwei Hunde jagen eine Katze."
REFERENCE = "Two dogs are chasing a cat."
PARTS = {"positions": Knockout(positions=False), "scale": Knockout(scale=False),
         "residual (decoder L3 cross)": Knockout(residual="decoder.2.cross"),
         "LayerNorm (encoder L1 FFN)": Knockout(layernorm="encoder.0.ffn"),
         "layer (decoder L1)": Knockout(layer="decoder.0"),
         "heads (cross L3, all)": Knockout(heads={"cross": {2: [0, 1, 2, 3]}}),
         "look-ahead mask": Knockout(causal_mask=False), "source token 1 hidden": Knockout(hide_source_token=1)}
ONE_SENTENCE_S, CORPUS_S = 0.5, 15.0
DATA = ROOT.parent / "shared" / "data" / "multi30k"


def report(name: str, wall: list[float], cpu: list[float], target: float | None) -> None:
    median = statistics.median(wall)
    verdict = "" if target is None else f"  target <= {target * 1000:.0f} ms: {'ok' if median <= target else 'MISSED'}"
    print(f"{name:>30}: {median * 1000:7.0f} ms (min {min(wall) * 1000:.0f}, max {max(wall) * 1000:.0f}; "
          f"CPU {statistics.median(cpu) * 1000:.0f} ms){verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "checkpoints" / "multi30k-de-en-small")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = core.load_checkpoint(args.checkpoint)
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} threads; "
          f"load average {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min)")
    print(f"{bundle.name} on {SOURCE!r}; median of {args.runs} runs after a warm-up run")
    for name, knockout in PARTS.items():
        report(f"knock-out: {name}", *timed(lambda k=knockout: knockout_effect(bundle, SOURCE, k), args.runs),
               ONE_SENTENCE_S)
    report("logit lens", *timed(lambda: logit_lens(bundle, SOURCE), args.runs), ONE_SENTENCE_S)
    report("teacher forcing / free running", *timed(lambda: free_running(bundle, SOURCE, REFERENCE), args.runs), None)
    report("contrast (dogs / cat, IG 32)", *timed(lambda: contrast(bundle, SOURCE, 1, "cat",
                                                                   method="integrated_gradients"), args.runs), None)
    if not (DATA / "val.de.gz").is_file():
        print(f"{DATA} is absent: no corpus figures")
        return
    read = [gzip.open(DATA / f"val.{lang}.gz", "rt", encoding="utf-8").read().splitlines()[:args.sentences]
            for lang in ("de", "en")]
    pairs = list(zip(*read))
    for name in ("positions", "look-ahead mask"):
        started, used = time.perf_counter(), time.process_time()
        effect = corpus_effect(bundle, pairs, PARTS[name])
        wall, cpu = time.perf_counter() - started, time.process_time() - used
        verdict = "ok" if wall <= CORPUS_S * len(pairs) / 100 else "MISSED"
        print(f"{len(pairs)} sentences, {name} knocked out (greedy, before and after): {wall:.2f} s (CPU {cpu:.2f} s; "
              f"target <= {CORPUS_S * len(pairs) / 100:.0f} s: {verdict}); BLEU {effect.before.bleu:.2f} -> "
              f"{effect.after.bleu:.2f}, chrF {effect.before.chrf:.2f} -> {effect.after.chrf:.2f}, "
              f"{effect.changed} translations changed")
    started = time.perf_counter()
    reliable = calibration(bundle, pairs)
    print(f"calibration of {len(pairs)} sentences: {time.perf_counter() - started:.2f} s; ECE {reliable.ece:.3f}, "
          f"perplexity {reliable.perplexity:.2f}, top-1 {reliable.top1:.3f}, mean confidence "
          f"{reliable.mean_confidence:.3f} over {reliable.tokens} tokens")
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
