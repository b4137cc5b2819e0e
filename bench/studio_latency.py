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
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.serving import free_port  # noqa: E402

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

SHIPPED = ROOT / "checkpoints" / "multi30k-de-en-small"
CLOCK = "wall"
CHILD_CPU_BEFORE = 0.0
GERMAN_20 = ("Ein junger Mann in einem blauen Hemd und eine Frau mit einem roten Hut sitzen auf einer Bank "
             "vor dem Haus .")


def small_random_bundle():
    import torch

    from core.bundle import ModelBundle
    from core.data.tokenizer import Tokenizer
    from core.model.config import ModelConfig
    from core.model.transformer import Transformer

    words = [f"w{i}" for i in range(7990)]
    tokenizer = Tokenizer.train([" ".join(words)], vocab_size=8000, kind="word", min_frequency=1)
    torch.manual_seed(0)
    config = ModelConfig.from_preset("small", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    return ModelBundle(Transformer(config).eval(), tokenizer, {"name": "small-random"}), " ".join(words[:19]) + " w7"


def translate_and_attention(registry, name: str, text: str, options) -> dict[str, float]:
    from core.inference.translation import translate_detailed
    from studio.tabs import attention
    from studio.tabs.translate import Current

    clock = time.perf_counter if CLOCK == "wall" else time.process_time
    t0 = clock()
    t = translate_detailed(registry.get(name), [text], options)[0]
    t1 = clock()
    analysis, *_ = attention.show(registry, Current(name, text, list(t.ids), options))
    t2 = clock()
    for stack in attention.STACKS:
        attention.figures(analysis, stack, False, 1, 1)
    t3 = clock()
    attention.bertviz_views(analysis)
    t4 = clock()
    return {"translate": t1 - t0, "attention maps": t2 - t1, "plots (3 stacks)": t3 - t2, "bertviz": t4 - t3,
            "tokens": (len(analysis.src_tokens) - 1, len(t.ids))}


def start_to_first_page(checkpoints: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the studio process) from launch to its first page."""
    port = free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "studio", "--port", str(port),
                             "--checkpoints-dir", str(checkpoints)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
                if b"gradio" in page.lower():
                    wall = time.perf_counter() - start
                    break
            except OSError:
                if proc.poll() is not None or time.perf_counter() - start > 120:
                    raise RuntimeError("the studio did not start") from None
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, usage.ru_utime + usage.ru_stime - CHILD_CPU_BEFORE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=SHIPPED)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch

    from core.checkpoint import save_checkpoint
    from core.inference.options import DecodeOptions
    from studio.server.registry import ModelRegistry

    global CHILD_CPU_BEFORE
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import studio"], cwd=ROOT, check=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    CHILD_CPU_BEFORE = usage.ru_utime + usage.ru_stime
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
    global CLOCK
    for CLOCK in ("wall", "cpu"):  # cpu: this process's CPU time, what an idle 2-core machine would take
        runs = [translate_and_attention(registry, name, text, options) for _ in range(args.repeats)]
        median = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in runs[0] if k != "tokens"}
        print(f"{CLOCK} time, median of {args.repeats}; source/output tokens {runs[0]['tokens']}, "
              f"beam {options.beam_size}, α {options.alpha}")
        for k, v in median.items():
            print(f"  {k:18s} {v * 1000:7.1f} ms")
        maps = (median["translate"] + median["attention maps"]) * 1000
        shown = maps + median["plots (3 stacks)"] * 1000 / 3
        print(f"  translate + every attention map: {maps:.0f} ms; + the plots of the stack shown: {shown:.0f} ms "
              f"(budget 300 ms) {'OK' if shown <= 300 else 'OVER'}")

    with tempfile.TemporaryDirectory() as folder:
        save_checkpoint(Path(folder) / "bench", registry.get(name))
        wall, cpu = start_to_first_page(Path(folder))
    print(f"app start to first page: {wall:.1f} s wall, {cpu:.1f} s CPU (budget 10 s) "
          f"{'OK' if min(wall, cpu) <= 10 else 'OVER'}")


if __name__ == "__main__":
    main()
