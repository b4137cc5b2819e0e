"""Training on a CUDA GPU: target tokens/s and MFU (bench/flops.py) of the trainer's step on Multi30k's
token batches (section 5.1: paper-base at ~25,000 tokens a step by default), variant beside variant:

    fp32              the plain path: real tokens alone (packing), figures read back at every step
    bf16              the same under bf16 autocast
    bf16 grid         bucketed batches on the whole grid, figures read back every --readback-every steps:
                      no host sync inside a step (core/training/acceleration.py)
    bf16 grid+compile the same, torch.compile'd (compiling is in the untimed warm-up)
    ... +cudagraphs   with --cuda-graphs: each bucket's shape replayed as a CUDA graph

The variants take turns, a block of --readback-every steps each, timed between two synchronisations of
the device, so the ratios are measured side by side under the same conditions.

    python bench/gpu_train.py [--preset paper-base] [--max-tokens 25000] [--rounds 6] [--no-compile]
    python bench/gpu_train.py --cpu-smoke     # the tiny preset, 3 steps a variant on the CPU: the code path
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.flops import H100_BF16_PEAK, mfu, training_flops  # noqa: E402
from core.bundle import new_bundle  # noqa: E402
from core.data.batching import Example, encode_pairs  # noqa: E402
from core.data.files import load_corpus  # noqa: E402
from core.data.tasks import make_task  # noqa: E402
from core.model.config import PRESETS, ModelConfig  # noqa: E402
from core.training.recipes import data_folder  # noqa: E402
from core.training.trainer import TrainConfig, Trainer  # noqa: E402

FAST = dict(amp="bf16", bucket=16)  # readback_every is the block length (--readback-every)
VARIANTS = {"fp32": dict(amp="off"), "bf16": dict(amp="bf16"), "bf16 grid": FAST,
            "bf16 grid+compile": dict(FAST, compile=True),
            "bf16 grid+compile+cudagraphs": dict(FAST, compile=True, cuda_graphs=True)}


def flops_per_target_token(config: ModelConfig, examples: list[Example]) -> float:
    """training_flops of the data's average sentence pair, per target token: source tokens per target token
    and the lengths a token's attention sees on average (each sentence weighted by its tokens)."""
    src = sum(len(e.src) for e in examples)
    tgt = sum(len(e.tgt) - 1 for e in examples)  # the positions scored: tgt_out
    src_len = sum(len(e.src) ** 2 for e in examples) / src
    tgt_len = sum((len(e.tgt) - 1) ** 2 for e in examples) / tgt
    return training_flops(config, src / tgt, 1.0, src_len, tgt_len)


def chosen_variants(args: argparse.Namespace) -> dict[str, dict]:
    keep = {k: v for k, v in VARIANTS.items() if not v.get("compile") or not args.no_compile}
    return {k: v for k, v in keep.items() if not v.get("cuda_graphs") or args.cuda_graphs}


def time_block(trainer: Trainer, steps: int, device: torch.device) -> float:
    """Target tokens/s over `steps` steps, from an idle device to an idle device."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    tokens = sum(trainer.step().tokens for _ in range(steps))
    sync()
    return tokens / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="paper-base")
    parser.add_argument("--max-tokens", type=int, default=25000, help="padded tokens per batch (5.1: ~25k)")
    parser.add_argument("--rounds", type=int, default=6, help="timed blocks per variant")
    parser.add_argument("--readback-every", type=int, default=10, help="steps per block, and the grid's read-back")
    parser.add_argument("--warmup-steps", type=int, default=20, help="untimed steps first (compilation is there)")
    parser.add_argument("--data-dir", type=Path, default=data_folder("multi30k"))
    parser.add_argument("--no-compile", action="store_true", help="leave out the compiled variants (a minute each)")
    parser.add_argument("--cuda-graphs", action="store_true", help="add the CUDA graphs variant")
    parser.add_argument("--peak", type=float, default=H100_BF16_PEAK, help="the chip's peak FLOP/s, for MFU")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny preset, synthetic data, 3 steps a variant on the CPU: checks the code path only")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.preset, args.max_tokens, args.rounds, args.readback_every, args.warmup_steps = "tiny", 256, 1, 3, 1
        args.no_compile, args.cuda_graphs = True, False
        device = torch.device("cpu")
        pairs = make_task("copy", seed=0, n_train=200, n_valid=10, n_test=10).train
    else:
        if not torch.cuda.is_available():
            sys.exit("this benchmark needs a CUDA GPU (or --cpu-smoke)")
        if not (args.data_dir / "train.de.gz").exists():
            sys.exit(f"{args.data_dir} holds no Multi30k: copy it to shared/data/multi30k (docs/gpu.md) or give "
                     f"--data-dir")
        device = torch.device("cuda")
        pairs = load_corpus(f"files:{args.data_dir}", "de", "en").train
    torch.manual_seed(0)
    kind = "word" if args.cpu_smoke else "bpe"
    bundle = new_bundle(pairs, args.preset, vocab_size=100 if args.cpu_smoke else 8000, tokenizer_kind=kind)
    examples, _ = encode_pairs(pairs, bundle.tokenizer, bundle.model.config.max_len)
    trainers = {}
    for name, options in chosen_variants(args).items():  # the same weights, and the same batches (the seed)
        config = TrainConfig(max_steps=10 ** 6, max_tokens=args.max_tokens, warmup=4000, device=device.type, seed=0,
                             readback_every=args.readback_every if options.get("bucket") else 1, **options)
        trainers[name] = Trainer(replace(bundle, model=copy.deepcopy(bundle.model)), examples, config)
    per_token = flops_per_target_token(bundle.model.config, examples)
    where = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"{where}, torch {torch.__version__}; preset {args.preset} ({bundle.model.num_parameters() / 1e6:.1f}M "
          f"parameters, {per_token / 1e6:.1f} MFLOP per target token), batches of <= {args.max_tokens} padded tokens")
    for name, trainer in trainers.items():  # compiles, and lets cuBLAS pick its kernels
        start = time.perf_counter()
        for _ in range(args.warmup_steps):
            trainer.step()
        print(f"  warm-up {name:30s} {args.warmup_steps} steps in {time.perf_counter() - start:6.1f} s")
    rates: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(args.rounds):
        for name, trainer in trainers.items():
            rates[name].append(time_block(trainer, args.readback_every, device))
    return report(rates, per_token, args, device)


def report(rates: dict[str, list[float]], per_token: float, args: argparse.Namespace, device: torch.device) -> dict:
    first = statistics.median(next(iter(rates.values())))
    figures = {}
    for name, values in rates.items():
        rate = statistics.median(values)
        share = mfu(rate * per_token, args.peak)
        figures[name] = {"tokens_per_s": rate, "mfu": share, "vs_fp32": rate / first}
        print(f"  {name:30s} {rate:11,.0f} target tok/s   MFU {share:6.1%}   {rate / first:5.2f}x fp32 "
              f"(median of {args.rounds} blocks of {args.readback_every} steps)")
    if device.type == "cuda":
        print(f"  peak GPU memory {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB (all variants together)")
    if args.json:
        args.json.write_text(json.dumps({"preset": args.preset, "max_tokens": args.max_tokens,
                                         "flops_per_target_token": per_token, "variants": figures}, indent=2))
    return figures


if __name__ == "__main__":
    main()
