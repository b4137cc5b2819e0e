"""Benchmark: the compiled decoder step (core/inference/compiled.py) beside the eager one, on the same weights.

1. One decoding step of one sentence (1 row: greedy; 4 rows: its beam), the eager Transformer.decode_step against
   the compiled static step, alternating in rounds so that load from other processes falls on both alike.
2. Multi30k test_2016 one sentence at a time (what the studio's Translate tab and `train_cli.py translate` of one
   sentence do), beam 4: eager against compiled, sentences/s, BLEU, and how many translations are identical;
   the batched eager default beside them, for a whole test set. The compile time is reported apart (graphs are
   compiled on first use, per rows, source length and target bucket, and cached on disk for the next run).

3. With --versus ctranslate2 (pip install ctranslate2): one short sentence, median of interleaved calls, beam 4 and
   greedy, ours eager and compiled (fp32) beside CTranslate2 fp32 and int8 on the same weights (core.export).

    python bench/compiled_step.py [--checkpoint DIR] [--limit N] [--threads T] [--rounds R] [--versus ctranslate2]
"""
from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.checkpoint import load_checkpoint  # noqa: E402
from core.inference import compiled  # noqa: E402
from core.inference.options import DecodeOptions  # noqa: E402
from core.inference.steps import copy_cache  # noqa: E402
from core.inference.translation import translate_detailed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "multi30k"


def lines(name: str, limit: int) -> list[str]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:limit]


def step_times(model, sentence: str, tokenizer, rounds: int, steps: int = 200) -> dict[str, float]:
    """Milliseconds per decoding step at position 2 of one sentence, 1 and 4 rows, eager and compiled (best round)."""
    fast = compiled.CompiledDecoding(model)
    src = torch.tensor([tokenizer.encode(sentence)])
    calls = {}
    with torch.inference_mode():
        for rows in (1, 4):
            eager_cache, static_cache = model.start_decoding(src), fast.start_decoding(src)
            for decoder, cache in ((model, eager_cache), (fast, static_cache)):
                decoder.decode_step(torch.full((1,), model.config.bos_id), cache)
                cache.reorder_hypotheses(torch.zeros(rows, dtype=torch.long))
            fast._make_room(static_cache, rows)  # the widened rows laid out once, as the second step does
            tokens = torch.full((rows,), 5)
            calls[f"eager, {rows} row(s)"] = lambda t=tokens, c=eager_cache: model.decode_step(t, copy_cache(c))

            calls[f"compiled, {rows} row(s)"] = lambda t=tokens, c=static_cache: fast.decode_step(t, copy_cache(c))
        for call in calls.values():
            call()  # compiles
        best = {name: float("inf") for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                started = time.perf_counter()
                for _ in range(steps):
                    call()
                best[name] = min(best[name], (time.perf_counter() - started) / steps * 1000)
    return best


def translations(bundle, sentences: list[str], **options) -> tuple[list[str], float]:
    started = time.perf_counter()
    texts = [t.text for t in translate_detailed(bundle, sentences, **options)]
    return texts, time.perf_counter() - started


def lone_sentence(bundle, sentence: str, threads: int, calls: int = 25) -> None:
    """Milliseconds to translate one sentence, ours eager and compiled against CTranslate2 (median of `calls`
    interleaved calls, after one untimed each), with CTranslate2's length penalty (ours "plain")."""
    import ctranslate2

    from core.export.ctranslate2 import export_ctranslate2, translate_tokens

    with tempfile.TemporaryDirectory() as folder:
        exported = export_ctranslate2(bundle, Path(folder) / "ct2")  # refuses unless it translates as ours
        for method in ("beam", "greedy"):
            options = DecodeOptions(method=method, length_penalty="plain")
            engines = {"ours eager": lambda o=options: translate_detailed(bundle, [sentence], o),
                       "ours compiled": lambda o=options: translate_detailed(bundle, [sentence], o, compiled=True)}
            for compute in ("float32", "int8"):
                translator = ctranslate2.Translator(str(exported), device="cpu", compute_type=compute,
                                                    intra_threads=threads)
                engines[f"CT2 {compute.replace('float32', 'fp32')}"] = (
                    lambda t=translator, o=options: translate_tokens(t, bundle, [sentence], o))
            times: dict[str, list[float]] = {name: [] for name in engines}
            for run in engines.values():
                run()  # untimed: compiles, allocates
            for _ in range(calls):
                for name, run in engines.items():
                    started = time.perf_counter()
                    run()
                    times[name].append((time.perf_counter() - started) * 1000)
            median = {name: statistics.median(values) for name, values in times.items()}
            print(f"  {method:>6}: " + " | ".join(f"{name} {ms:.1f} ms" for name, ms in median.items()))
            print(f"          ours compiled / CT2 fp32 time {median['ours compiled'] / median['CT2 fp32']:.2f}x "
                  f"(eager {median['ours eager'] / median['CT2 fp32']:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-de-en-small"))
    parser.add_argument("--limit", type=int, default=1000, help="test_2016 sentences (default: all 1,000)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the studio's)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the step timing (the best counts)")
    parser.add_argument("--versus", choices=["ctranslate2"], help="also time one sentence against CTranslate2")
    args = parser.parse_args()
    if not compiled.compiler_available():
        raise SystemExit("compiled_step.py: no C++ compiler (g++, c++ or clang++) on PATH: nothing to compile")
    if not (DATA / "test_2016_flickr.de.gz").is_file():
        raise SystemExit(f"compiled_step.py: needs Multi30k's test_2016 in {DATA}")
    torch.set_num_threads(args.threads)
    bundle = load_checkpoint(args.checkpoint)
    bundle.model.eval()
    sources, references = lines("test_2016_flickr.de.gz", args.limit), lines("test_2016_flickr.en.gz", args.limit)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{args.threads} thread(s); load average before: {os.getloadavg()[0]:.1f}")

    print("\n1. one decoding step, ms (best of rounds):")
    times = step_times(bundle.model, sources[0], bundle.tokenizer, args.rounds)
    for rows in (1, 4):
        eager, fast = times[f"eager, {rows} row(s)"], times[f"compiled, {rows} row(s)"]
        print(f"  {rows} row(s): eager {eager:.2f}, compiled {fast:.2f}  ({eager / fast:.2f}x)")

    print(f"\n2. test_2016, {len(sources)} sentences, beam 4, one at a time:")
    started = time.perf_counter()
    translate_detailed(bundle, sources, compiled=True)  # compiles every shape the set needs
    warm = time.perf_counter() - started
    runs = {"eager, one at a time": dict(batch_size=1), "compiled, one at a time": dict(compiled=True),
            "eager, batched (default)": {}}
    results = {name: translations(bundle, sources, **options) for name, options in runs.items()}
    eager_texts, eager_s = results["eager, one at a time"]
    for name, (texts, seconds) in results.items():
        bleu = sacrebleu.corpus_bleu(texts, [references]).score
        same = sum(a == b for a, b in zip(texts, eager_texts)) / len(texts)
        print(f"  {name:<26} {len(texts) / seconds:6.1f} sent/s ({eager_s / seconds:.2f}x)  BLEU {bleu:.2f}  "
              f"identical to eager {same:.1%}")
    print(f"  (the compiled run's first pass, compiling what was not cached: {warm:.0f} s)")
    if args.versus:
        print(f"\n3. one sentence ({sources[0]!r}), median of 25 interleaved calls, {args.threads} thread(s):")
        lone_sentence(bundle, sources[0], args.threads)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
