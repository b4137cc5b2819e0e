"""Training throughput on Multi30k with token batching (section 5.1: batches of sentences of
similar length) vs fixed-size batches of random sentences (the seeds' way), same model, same
number of target tokens per batch on average. Prints target tokens/s and padding ratios.

    python bench/train_throughput.py [--steps 20] [--max-tokens 4096]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from core.data.batching import TokenBatcher, encode_pairs, sentence_batches  # noqa: E402
from core.data.files import load_corpus  # noqa: E402
from core.data.tokenizer import Tokenizer  # noqa: E402
from core.model.config import ModelConfig  # noqa: E402
from core.model.transformer import Transformer  # noqa: E402
from core.training.loss import Objective  # noqa: E402
from core.training.trainer import make_optimizer  # noqa: E402

MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
SHIPPED = ROOT / "checkpoints" / "multi30k-de-en-small"


def run(batches, model, optimizer) -> tuple[float, float]:
    """Median target tokens/s over the batches (after one warm-up) and mean padding ratio."""
    objective = Objective(model, 0.1)
    rates = []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        loss, _, _ = objective(batch.src, batch.tgt_in, batch.tgt_out)
        optimizer.zero_grad()
        (loss / batch.n_tgt_tokens).backward()
        optimizer.step()
        if i:
            rates.append(batch.n_tgt_tokens / (time.perf_counter() - start))
    return statistics.median(rates), statistics.mean(b.padding_ratio for b in batches)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="timed batches per method")
    parser.add_argument("--max-tokens", type=int, default=4096)
    args = parser.parse_args(argv)
    if not (MULTI30K / "train.de.gz").exists():
        sys.exit(f"{MULTI30K} is absent: this benchmark needs the Multi30k data")
    corpus = load_corpus(f"files:{MULTI30K}", "de", "en")
    tokenizer = Tokenizer.load(SHIPPED / "tokenizer.json") if SHIPPED.exists() else \
        Tokenizer.train((s for pair in corpus.train for s in pair), 8000)
    examples, _ = encode_pairs(corpus.train, tokenizer, 256)
    token_batches = list(TokenBatcher(examples, args.max_tokens, seed=0))
    sentences_per_batch = round(len(examples) / len(token_batches))
    fixed = sentence_batches(examples, sentences_per_batch, seed=0)
    print(f"Multi30k train: {len(examples)} pairs; token batches of <= {args.max_tokens} padded tokens "
          f"({len(token_batches)} per epoch) vs {len(fixed)} random batches of {sentences_per_batch} sentences; "
          f"{torch.get_num_threads()} threads")
    config = ModelConfig.from_preset("small", src_vocab_size=tokenizer.vocab_size,
                                     tgt_vocab_size=tokenizer.vocab_size)
    results = {}
    for name, batches in (("token batching", token_batches), ("sentence batches", fixed)):
        torch.manual_seed(0)
        model = Transformer(config).train()
        optimizer = make_optimizer(model)
        for group in optimizer.param_groups:
            group["lr"] = 5e-4
        results[name] = run(batches[: args.steps + 1], model, optimizer)
    for name, (rate, padding) in results.items():
        print(f"  {name:18s} {rate:8.0f} target tok/s   padding {padding:.1%}")
    ratio = results["token batching"][0] / results["sentence batches"][0]
    print(f"  speed-up token / sentence batching: {ratio:.2f}x")


if __name__ == "__main__":
    main()
