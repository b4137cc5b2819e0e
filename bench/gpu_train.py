"""Training on a CUDA GPU: target tokens/s of the trainer's step on Multi30k's token batches
(section 5.1) in fp32, under bf16 autocast, and under bf16 autocast with torch.compile; the
variants take turns step by step, so that the ratios to fp32 are measured side by side. A step's
time ends when its loss is read back; its optimizer's last kernels then finish during the next
variant's step (the three optimizers are alike, so each is charged about what it passes on).

    python bench/gpu_train.py [--preset paper-base] [--max-tokens 8192] [--steps 40] [--warmup-steps 20] [--no-compile]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from core.batching import encode_pairs  # noqa: E402
from core.bundle import new_bundle  # noqa: E402
from core.config import PRESETS  # noqa: E402
from core.data import load_corpus  # noqa: E402
from core.trainer import TrainConfig, Trainer  # noqa: E402

MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
VARIANTS = {"fp32": dict(amp="off"), "bf16": dict(amp="bf16"), "bf16 + compile": dict(amp="bf16", compile=True)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="paper-base")
    parser.add_argument("--max-tokens", type=int, default=8192, help="padded tokens per batch")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per variant")
    parser.add_argument("--warmup-steps", type=int, default=20,
                        help="untimed steps first (compilation happens there)")
    parser.add_argument("--data-dir", type=Path, default=MULTI30K)
    parser.add_argument("--no-compile", action="store_true", help="leave out the compiled variant (minutes to compile)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("this benchmark needs a CUDA GPU")
    if not (args.data_dir / "train.de.gz").exists():
        sys.exit(f"{args.data_dir} holds no Multi30k: this benchmark needs ../shared/data/multi30k (or --data-dir)")
    corpus = load_corpus(f"files:{args.data_dir}", "de", "en")
    torch.manual_seed(0)
    bundle = new_bundle(corpus.train, args.preset, vocab_size=8000)
    examples, _ = encode_pairs(corpus.train, bundle.tokenizer, bundle.model.config.max_len)
    trainers = {}
    variants = {k: v for k, v in VARIANTS.items() if not (args.no_compile and v.get("compile"))}
    for name, options in variants.items():  # the same weights, and the same batches (the batcher's seed)
        config = TrainConfig(max_steps=10 ** 6, max_tokens=args.max_tokens, warmup=4000, device="cuda", seed=0,
                             **options)
        trainers[name] = Trainer(replace(bundle, model=copy.deepcopy(bundle.model)), examples, config)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; preset {args.preset} "
          f"({bundle.model.num_parameters() / 1e6:.1f}M parameters), Multi30k De->En, "
          f"batches of <= {args.max_tokens} padded tokens")
    for name, trainer in trainers.items():  # compiles, and lets cuBLAS pick its kernels
        start = time.perf_counter()
        for _ in range(args.warmup_steps):
            trainer.step()
        print(f"  warm-up {name:15s} {args.warmup_steps} steps in {time.perf_counter() - start:6.1f} s")
    rates: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(args.steps):
        for name, trainer in trainers.items():
            # The step's loss read-back waits for the GPU; its optimizer kernels finish within the next step.
            rates[name].append(trainer.step().tokens_per_s)
    fp32 = statistics.median(rates["fp32"])
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"  {name:15s} {rate:10,.0f} target tok/s (median of {args.steps} steps)   {rate / fp32:5.2f}x fp32")
    print(f"  peak GPU memory {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB (all variants together)")


if __name__ == "__main__":
    main()
