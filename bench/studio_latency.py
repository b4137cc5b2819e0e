"""Studio latency: translate + every attention map for a 20-token sentence with a small model
(3+3 layers, d_model 256), and app start to first page. Budgets: 300 ms and 10 s on 2 CPU cores.

    python bench/studio_latency.py [--checkpoint checkpoints/multi30k-de-en-small] [--repeats 5]

Without a checkpoint (or when the shipped one is absent) a random `small` model with a word
vocabulary of 8,000 entries is used, and its output is capped at 22 tokens + <eos> (an untrained
model would otherwise run to the maximum length).
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

SHIPPED = ROOT / "checkpoints" / "multi30k-de-en-small"
GERMAN_20 = "Ein junger Mann in einem blauen Hemd und eine Frau mit einem roten Hut sitzen auf einer Bank vor dem Haus ."


def small_random_bundle():
    import torch

    from core.bundle import ModelBundle
    from core.config import ModelConfig
    from core.model import Transformer
    from core.tokenizer import Tokenizer

    words = [f"w{i}" for i in range(7990)]
    tokenizer = Tokenizer.train([" ".join(words)], vocab_size=8000, kind="word", min_frequency=1)
    torch.manual_seed(0)
    config = ModelConfig.from_preset("small", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    return ModelBundle(Transformer(config).eval(), tokenizer, {"name": "small-random"}), " ".join(words[:19]) + " w7"


def translate_and_attention(registry, name: str, text: str, options) -> dict[str, float]:
    from studio.tabs import attention
    from studio.tabs.translate import Current

    from core.decoding import translate_detailed

    t0 = time.perf_counter()
    t = translate_detailed(registry.get(name), [text], options)[0]
    t1 = time.perf_counter()
    analysis, *_ = attention.show(registry, Current(name, text, list(t.ids), options))
    t2 = time.perf_counter()
    for stack in attention.STACKS:
        attention.figures(analysis, stack, False, 1, 1)
    t3 = time.perf_counter()
    attention.bertviz_views(analysis)
    t4 = time.perf_counter()
    return {"translate": t1 - t0, "attention maps": t2 - t1, "plots (3 stacks)": t3 - t2, "bertviz": t4 - t3,
            "tokens": (len(analysis.src_tokens) - 1, len(t.ids))}


def start_to_first_page(checkpoints: Path) -> float:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "studio", "--port", str(port), "--checkpoints-dir", str(checkpoints)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
                if b"gradio" in page.lower():
                    return time.perf_counter() - start
            except OSError:
                if proc.poll() is not None or time.perf_counter() - start > 120:
                    raise RuntimeError("the studio did not start")
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=SHIPPED)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch

    from core.checkpoint import save_checkpoint
    from core.decoding import DecodeOptions
    from studio.registry import ModelRegistry

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import studio"], cwd=ROOT, check=True)
    print(f"python -c 'import studio': {time.perf_counter() - t:.2f} s (interpreter start included)")

    torch.set_num_threads(1)  # as the studio runs (python -m studio --threads 1)
    registry = ModelRegistry(None)
    if args.checkpoint.is_dir():
        name, text, options = registry.open(args.checkpoint), GERMAN_20, DecodeOptions()
    else:
        bundle, text = small_random_bundle()
        name, options = registry.add("small-random", bundle), DecodeOptions(max_len_a=0.0, max_len_b=23)
    c = registry.get(name).model.config
    print(f"model {name}: {c.encoder_layers}+{c.decoder_layers} layers, d_model {c.d_model}, "
          f"{registry.get(name).model.num_parameters():,} parameters; torch threads {torch.get_num_threads()}")
    translate_and_attention(registry, name, text, options)  # warm-up (first bertviz import included)
    runs = [translate_and_attention(registry, name, text, options) for _ in range(args.repeats)]
    best = {k: min(r[k] for r in runs) for k in runs[0] if k != "tokens"}
    median = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in best}
    print(f"source/output tokens: {runs[0]['tokens']}; beam {options.beam_size}, α {options.alpha}")
    for k in best:
        print(f"  {k:18s} median {median[k] * 1000:7.1f} ms   best {best[k] * 1000:7.1f} ms")
    core_ms = (median["translate"] + median["attention maps"] + median["plots (3 stacks)"]) * 1000
    print(f"translate + every attention map (+ their plots): {core_ms:.0f} ms (budget 300 ms) "
          f"{'OK' if core_ms <= 300 else 'OVER'}")

    with tempfile.TemporaryDirectory() as folder:
        save_checkpoint(Path(folder) / "bench", registry.get(name))
        seconds = start_to_first_page(Path(folder))
    print(f"app start to first page: {seconds:.1f} s (budget 10 s) {'OK' if seconds <= 10 else 'OVER'}")


if __name__ == "__main__":
    main()
