"""Benchmark: batched, key/value-cached decoding (core.inference.beam_search, core.inference.greedy)
against a naive decoder on the same weights, on Multi30k test_2016 (1,000 German captions), beam 4
and greedy.

The naive decoder is the seed notebooks' approach: one sentence at a time, and for every
hypothesis at every step the whole decoder re-runs over the whole prefix, projecting the encoder
output to cross-attention keys/values again as seed 000's `model.decode(ys, enc_output, ...)`
does (the encoder runs once per sentence). It follows the rules of core.inference.step_rules (section
6.1 of the paper: beam 4, length penalty α = 0.6, maximum output length input + 50), so the
outputs must be identical.
It is slow (about 0.25 s a sentence for beam 4), so it runs on --naive-limit sentences spread over
the set: one from each of that many equal strata of source length, so that its sentences/s stand
for the whole set's (the set's first 100 hold its longest output; their greedy outputs are 6% longer
than the set's mean).

With --versus ctranslate2 it instead times ours against CTranslate2 on the same weights (the checkpoint
exported by core.export, which checks itself): ours fp32, ours int8 and bf16 (core.inference.precision), CTranslate2
fp32 and int8, side by side in one process (each round runs every engine once, so load from other processes
falls on all alike; the best round counts), with CTranslate2's length penalty (ours "plain"), printing
sentences/s, the ratios and BLEU against the references.

To show how far the batched decoder could still go, it also counts the floating-point work of its
matrix products (torch's FlopCounterMode, one untimed pass) and times a large matrix product on
this CPU: were everything but those products free, the speed-up could be at most "ceiling".

    python bench/decode.py [--checkpoint DIR] [--naive-limit N] [--limit M] [--rounds R] [--threads T]
    python bench/decode.py --versus ctranslate2 [--threads 1,2] [--limit M] [--rounds R]
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.inference.options import DecodeOptions  # noqa: E402
from core.inference.step_rules import length_penalty  # noqa: E402
from core.inference.steps import inference  # noqa: E402
from core.inference.translation import max_output_length, prepare_source, translate_detailed  # noqa: E402
from core.model.transformer import Transformer  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared/data/multi30k"
TEST_FILE = "test_2016_flickr.de.gz"
REFERENCE_FILE = "test_2016_flickr.en.gz"


# ----- the naive reference -------------------------------------------------------------------
class NaiveDecoder:
    """One sentence; next-token log-probabilities from the decoder run over the whole prefix."""

    def __init__(self, model: Transformer, src_ids: list[int]):
        self.model = model
        self.device = next(model.parameters()).device
        src = torch.tensor([src_ids], device=self.device)
        memory = model.encode(src)
        # Each call starts from scratch: no self-attention cache, cross-attention keys/values
        # projected from the encoder output again (nothing but the encoder output is reused).
        self.cross_memory = lambda: model.cross_memory(src, memory)

    def log_probs(self, prefix: list[int], at_max: bool) -> torch.Tensor:
        cfg = self.model.config
        tgt = torch.tensor([[cfg.bos_id] + prefix], device=self.device)
        # The whole prefix through the whole decoder stack.
        hidden = self.model.decode(tgt, self.cross_memory())[0]
        lp = self.model.project(hidden[0, -1]).float().log_softmax(dim=-1)
        lp[[cfg.pad_id, cfg.bos_id]] = float("-inf")
        if at_max:  # the last position allowed: eos only
            eos = lp[cfg.eos_id].clone()
            lp.fill_(float("-inf"))
            lp[cfg.eos_id] = eos
        return lp


def naive_greedy(model: Transformer, src_ids: list[int], max_out: int, options: DecodeOptions) -> list[int]:
    decoder, ids = NaiveDecoder(model, src_ids), []
    while not ids or ids[-1] != model.config.eos_id:
        ids.append(int(decoder.log_probs(ids, len(ids) + 1 >= max_out).argmax()))
    return ids[:-1]


def naive_beam(model: Transformer, src_ids: list[int], max_out: int, options: DecodeOptions) -> list[int]:
    """Beam search with the rules of core.inference.step_rules, hypothesis by hypothesis; the best output."""
    decoder, k, eos = NaiveDecoder(model, src_ids), options.beam_size, model.config.eos_id
    beams: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    for step in range(max_out):
        candidates = []
        for ids, logprob in beams:
            top = (logprob + decoder.log_probs(ids, step + 1 >= max_out)).topk(2 * k)
            candidates += [(s, ids, t) for s, t in zip(top.values.tolist(), top.indices.tolist())]
        candidates = sorted(candidates, key=lambda c: -c[0])[:2 * k]
        beams = [(ids + [t], s) for s, ids, t in candidates if t != eos][:k]
        for s, ids, t in candidates[:k]:
            if t == eos and len(finished) < k:
                finished.append((ids, s / length_penalty(step + 1, options)))
        if len(finished) >= k:
            break
    return max(finished, key=lambda f: f[1])[0]


# ----- the benchmark -----------------------------------------------------------------------
def run_benchmark(bundle: Any, sentences: list[str], naive_limit: int, rounds: int = 3,
                  out: Callable[[str], None] = print) -> dict[str, dict[str, float | bool]]:
    """Time both decoders for beam 4 and greedy; print and return the figures per method.
    The two alternate over `rounds` rounds (the batched decoder decodes every sentence each
    round, the naive one the next part of its subset), so a machine that speeds up or slows
    down during the run affects both alike."""
    model, tokenizer = bundle.model, bundle.tokenizer
    picks = spread_sample(bundle, sentences, naive_limit)
    subset = [sentences[i] for i in picks]
    parts = [subset[len(subset) * r // rounds:len(subset) * (r + 1) // rounds] for r in range(rounds)]
    figures, peak = {}, matmul_rate(next(model.parameters()).device)
    for method, naive in (("beam", naive_beam), ("greedy", naive_greedy)):
        options = DecodeOptions(method=method)
        fast_time = naive_time = 0.0
        slow: list[list[int]] = []
        for part in parts:
            start = time.perf_counter()
            fast = translate_detailed(bundle, sentences, options)
            fast_time += time.perf_counter() - start
            with inference(model):
                start = time.perf_counter()
                slow += [_naive(naive, model, tokenizer, text, options) for text in part]
                naive_time += time.perf_counter() - start
        fast_rate, naive_rate = rounds * len(sentences) / fast_time, len(subset) / naive_time
        same = sum(fast[i].ids == s for i, s in zip(picks, slow))
        with FlopCounterMode(display=False) as counter:
            translate_detailed(bundle, sentences, options)
        gflop = counter.get_total_flops() / 1e9
        ceiling = len(sentences) / (gflop / peak) / naive_rate
        figures[method] = {"batched_per_s": fast_rate, "naive_per_s": naive_rate,
                           "speedup": fast_rate / naive_rate, "identical": same == len(subset),
                           "gflop": gflop, "ceiling": ceiling}
        label = f"beam {options.beam_size}" if method == "beam" else "greedy"
        out(f"{label:>7}: batched+cached {fast_rate:8.2f} sentences/s ({len(sentences)} sentences, "
            f"batch {options.sentences_per_batch}) | naive {naive_rate:6.2f} sentences/s ({len(subset)} of them) | "
            f"speed-up {fast_rate / naive_rate:6.1f}x | identical outputs on those {len(subset)}: "
            f"{'yes' if same == len(subset) else f'NO ({len(subset) - same} differ)'}")
        out(f"{'':>7}  its matrix products: {gflop:.1f} GFLOP, {gflop * fast_rate / len(sentences):.0f} GFLOP/s "
            f"over the run (here: {peak:.0f} GFLOP/s on a 1024x1024 product) | ceiling {ceiling:.1f}x")
    return figures


def spread_sample(bundle: Any, sentences: list[str], n: int) -> list[int]:
    """Indices of n sentences, in input order: the middle one of each of n equal strata of the
    sentences ranked by source length (ties in input order)."""
    if n >= len(sentences):
        return list(range(len(sentences)))
    max_len = bundle.model.config.max_len
    ranked = sorted(range(len(sentences)),
                    key=lambda i: (len(prepare_source(bundle.tokenizer, sentences[i], max_len).ids), i))
    return sorted(ranked[(2 * k + 1) * len(sentences) // (2 * n)] for k in range(n))


def matmul_rate(device: torch.device, size: int = 1024, repeats: int = 20) -> float:
    """GFLOP/s of a size x size float32 matrix product (on a CPU with torch's threads): the best of 3 tries."""
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(3):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 * repeats / best / 1e9


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _naive(decode: Callable, model: Transformer, tokenizer: Any, text: str, options: DecodeOptions) -> list[int]:
    source = prepare_source(tokenizer, text, model.config.max_len)
    if source.empty:
        return []
    max_out, _ = max_output_length(len(source.ids), options, model.config.max_len)
    return decode(model, source.ids, max_out, options)


# ----- against CTranslate2 --------------------------------------------------------------------
def versus_ctranslate2(bundle: Any, sentences: list[str], references: list[str], threads: list[int],
                       rounds: int, out: Callable[[str], None] = print) -> dict[str, dict[str, float]]:
    """Time ours (fp32, int8, bf16) and CTranslate2 (fp32, int8) for beam 4 and greedy at each thread count;
    print and return sentences/s and BLEU per engine, keyed "method threads"."""
    import ctranslate2

    from core.export.ctranslate2 import export_ctranslate2, translate_tokens
    from core.training.evaluation import evaluate_bleu

    target = bundle.target_tokenizer
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        exported = export_ctranslate2(bundle, Path(folder) / "ct2")  # refuses unless it translates as ours
        for n in threads:
            torch.set_num_threads(n)
            engines: dict[str, Callable[[DecodeOptions], list[str]]] = {
                f"ours {dtype}": lambda o, d=dtype: [t.text for t in translate_detailed(bundle, sentences, o, dtype=d)]
                for dtype in ("fp32", "int8", "bf16")}
            for compute in ("float32", "int8"):
                translator = ctranslate2.Translator(str(exported), device="cpu", compute_type=compute, intra_threads=n)
                engines[f"CT2 {compute.replace('float32', 'fp32')}"] = (
                    lambda o, t=translator: [target.decode([target.hf.token_to_id(p) for p in tokens])
                                             for tokens in translate_tokens(t, bundle, sentences, o)])
            for method in ("beam", "greedy"):
                options = DecodeOptions(method=method, length_penalty="plain")
                rates, texts = _race(engines, options, rounds, len(sentences))
                key = f"{method} {n}"
                figures[key] = {name: rates[name] for name in engines}
                figures[key].update({f"{name} BLEU": evaluate_bleu(texts[name], references).bleu for name in engines})
                same = sum(a == b for a, b in zip(texts["ours fp32"], texts["CT2 fp32"]))
                out(f"{method:>6}, {n} thread{'s' * (n > 1)}: " + " | ".join(
                    f"{name} {rates[name]:6.1f} sent/s BLEU {figures[key][name + ' BLEU']:.2f}" for name in engines))
                out(f"{'':>17}ours fp32 / CT2 fp32 {rates['ours fp32'] / rates['CT2 fp32']:.2f}x, ours int8 / CT2 int8 "
                    f"{rates['ours int8'] / rates['CT2 int8']:.2f}x, ours bf16 / CT2 int8 "
                    f"{rates['ours bf16'] / rates['CT2 int8']:.2f}x; fp32 outputs identical {same}/{len(sentences)}")
    return figures


def _race(engines: dict[str, Callable[[DecodeOptions], list[str]]], options: DecodeOptions, rounds: int,
          count: int) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each round runs every engine once, in turn; an engine's rate is its best round's."""
    best = {name: float("inf") for name in engines}
    texts: dict[str, list[str]] = {}
    for _ in range(rounds):
        for name, run in engines.items():
            start = time.perf_counter()
            texts[name] = run(options)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: count / seconds for name, seconds in best.items()}, texts


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        return platform.processor() or platform.machine()


def read_references(data_dir: Path, limit: int | None) -> list[str]:
    with gzip.open(data_dir / REFERENCE_FILE, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:limit]


def read_sentences(data_dir: Path, limit: int | None) -> list[str]:
    path = data_dir / TEST_FILE
    if not path.exists():
        raise SystemExit(f"Multi30k test set not found: {path} is absent. Put the Multi30k files in "
                         f"{data_dir} (task 1's raw text from the multi30k/dataset repository on GitHub, "
                         f"data/task1/raw; "
                         f"the README's 'Command line' section) or pass --data-dir.")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="checkpoints/multi30k-de-en-small", help="checkpoint directory")
    parser.add_argument("--naive-limit", type=int, default=100,
                        help="time the naive decoder on N sentences spread over the set's source lengths "
                             "(default 100)")
    parser.add_argument("--limit", type=int, default=None, help="decode only the first M sentences")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternate the two decoders over R rounds (default 3; see run_benchmark)")
    parser.add_argument("--data-dir", type=Path, default=DATA, help=f"Multi30k folder (default {DATA})")
    parser.add_argument("--threads", default="0",
                        help="torch CPU threads for both decoders (default: torch's choice; with --versus: 1); "
                             "with --versus a list such as 1,2 runs each")
    parser.add_argument("--versus", choices=("ctranslate2",),
                        help="time ours against CTranslate2 on the same weights instead of the naive decoder")
    parser.add_argument("--device", default="cpu", help="where both decoders run: cpu (default), cuda, cuda:1, ...")
    args = parser.parse_args(argv)
    try:
        threads = [int(n) for n in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads takes a number or a list such as 1,2; got {args.threads!r}")
    if args.rounds < 1 or args.naive_limit < 1 or min(threads) < 0:
        parser.error(f"--rounds and --naive-limit must be at least 1, --threads at least 0; got {args.rounds}, "
                     f"{args.naive_limit} and {args.threads}")
    sentences = read_sentences(args.data_dir, args.limit)
    from core.checkpoint import load_checkpoint

    bundle = load_checkpoint(args.checkpoint)
    if args.versus:
        print(f"{bundle.name} vs CTranslate2 on {cpu_model()}, Multi30k test_2016 De->En, {len(sentences)} "
              f"sentences, best of {args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.1f}")
        versus_ctranslate2(bundle, sentences, read_references(args.data_dir, args.limit),
                           [n or 1 for n in threads], args.rounds)
        print(f"load average at the end {os.getloadavg()[0]:.1f} (1 minute), {os.getloadavg()[2]:.1f} (15 minutes)")
        return 0
    if threads[0]:
        torch.set_num_threads(threads[0])
    bundle.model.to(args.device)
    device = next(bundle.model.parameters()).device
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"{torch.get_num_threads()} CPU threads")
    print(f"{bundle.name}: {bundle.model.num_parameters() / 1e6:.1f}M parameters, {where}, "
          f"Multi30k test_2016 De->En")
    print(f"The naive decoder runs one sentence at a time, each hypothesis re-decoding its whole prefix; "
          f"it is timed and compared on {min(args.naive_limit, len(sentences))} sentences only, one from each "
          f"stratum of source length.")
    run_benchmark(bundle, sentences, args.naive_limit, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
