"""Training-step throughput (forward, backward, Adam), target tokens per second.

Two comparisons, each measured side by side in one run (variants interleaved, so machine
load affects all alike):
  1. seed 000's model vs ours at the seed's shapes (3+3 layers, d_model 256, d_ff 512,
     4 heads, vocab 10k, 64 sentences of 10-24 tokens); on CPUs with native bf16 (AVX512-BF16,
     AMX) also ours under bf16 autocast, which the trainer's `--amp auto` picks there;
  2. the `small` preset at ~4k target tokens per batch: our fast path (fused attention,
     output layer and loss on real tokens only) vs our inspect path (eq. 1 spelled out).

    python bench/train_step.py [--steps 10] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from core import ModelConfig, Transformer  # noqa: E402
from core.training.loss import Objective  # noqa: E402
from core.training.trainer import make_optimizer, resolve_amp  # noqa: E402


def random_batch(n_sentences: int, vocab: int, lo: int = 10, hi: int = 24, seed: int = 0):
    """Right-padded source/target ids with lengths uniform in [lo, hi] (Multi30k-like)."""
    g = torch.Generator().manual_seed(seed)

    def side():
        lengths = torch.randint(lo, hi + 1, (n_sentences,), generator=g)
        ids = torch.zeros(n_sentences, int(lengths.max()), dtype=torch.long)
        for row, n in enumerate(lengths.tolist()):
            ids[row, :n] = torch.randint(4, vocab, (n,), generator=g)
        return ids

    src, tgt = side(), side()
    return src, tgt[:, :-1], tgt[:, 1:]


def seed_adam(model):
    """Seed 000's optimizer: torch's default (for-each) Adam."""
    return torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)


def our_adam(model):
    optimizer = make_optimizer(model)
    for group in optimizer.param_groups:
        group["lr"] = 1e-4
    return optimizer


def seed_step(model, criterion, optimizer, src, tgt_in, tgt_out):
    logits = model(src, tgt_in)
    loss = criterion(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def ours_step(objective, optimizer, src, tgt_in, tgt_out, amp: torch.dtype | None = None):
    with torch.autocast("cpu", dtype=amp, enabled=amp is not None):
        loss, _, _ = objective(src, tgt_in, tgt_out)
    optimizer.zero_grad()
    (loss / tgt_out.ne(0).sum()).backward()
    optimizer.step()


def inspect_step(model, optimizer, src, tgt_in, tgt_out):
    """The same loss as ours_step, but through the inspect attention path."""
    logits, _ = model(src, tgt_in, return_attention=True)
    real = tgt_out.ne(0)
    loss = torch.nn.functional.cross_entropy(logits[real], tgt_out[real], label_smoothing=0.1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def race(variants: dict, batch, steps: int) -> dict[str, float]:
    """Median target tokens/s per variant, variants interleaved step by step."""
    tokens = int(batch[2].ne(0).sum())
    times = {name: [] for name in variants}
    for _ in range(2):  # warm-up
        for fn in variants.values():
            fn(*batch)
    for _ in range(steps):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn(*batch)
            times[name].append(time.perf_counter() - start)
    return {name: tokens / statistics.median(t) for name, t in times.items()}


def ours(config: ModelConfig) -> Transformer:
    torch.manual_seed(0)
    return Transformer(config).train()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}")

    # 1. seed 000 vs ours at the seed's shapes
    from seed_model import FIX, load_seed000, seed_config
    seed = load_seed000()
    torch.manual_seed(0)
    seed_model = seed["Transformer"](seed_config(10000)).train()
    criterion = seed["LabelSmoothingLoss"](10000, 0, 0.1)
    config = ModelConfig.from_preset("small", d_ff=512, src_vocab_size=10000, tgt_vocab_size=10000)
    model = ours(config)
    objective = Objective(model, 0.1)
    seed_opt, our_opt = seed_adam(seed_model), our_adam(model)
    batch = random_batch(64, 10000)
    print(f"\n[1] seed 000 vs ours, seed shapes, batch {tuple(batch[0].shape)} src / "
          f"{int(batch[2].ne(0).sum())} target tokens (seed fix applied: {FIX})")
    variants = {"seed 000": lambda *b: seed_step(seed_model, criterion, seed_opt, *b),
                "ours (trainer step)": lambda *b: ours_step(objective, our_opt, *b)}
    bf16 = resolve_amp("auto", torch.device("cpu"))
    if bf16 is not None:
        bf16_model = ours(config)
        bf16_objective, bf16_opt = Objective(bf16_model, 0.1), our_adam(bf16_model)
        variants["ours, bf16 autocast"] = lambda *b: ours_step(bf16_objective, bf16_opt, *b, amp=bf16)
    rates = race(variants, batch, args.steps)
    for name, rate in rates.items():
        print(f"  {name:24s} {rate:8.0f} target tok/s   {rate / rates['seed 000']:.2f}x seed 000")
    if bf16 is None:
        print("  (bf16 autocast not timed: this CPU has no native bf16, AVX512-BF16 or AMX)")

    # 2. small preset, ~4k target tokens: fast vs inspect path
    config = ModelConfig.from_preset("small", src_vocab_size=8000, tgt_vocab_size=8000)
    model = ours(config)
    objective, opt = Objective(model, 0.1), our_adam(model)
    batch = random_batch(256, 8000)
    print(f"\n[2] small preset ({model.num_parameters() / 1e6:.1f}M parameters), "
          f"{int(batch[2].ne(0).sum())} target tokens per batch")
    rates = race({"fast path": lambda *b: ours_step(objective, opt, *b),
                  "inspect path": lambda *b: inspect_step(model, opt, *b)}, batch, args.steps)
    for name, rate in rates.items():
        print(f"  {name:24s} {rate:8.0f} target tok/s")
    print(f"  speed-up fast / inspect: {rates['fast path'] / rates['inspect path']:.2f}x")


if __name__ == "__main__":
    main()
