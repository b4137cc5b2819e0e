"""Transformer Studio from the command line: train, evaluate, translate, average.

    python train_cli.py train --preset small --data files:../shared/data/multi30k --src de --tgt en --out runs/m30k
    python train_cli.py evaluate --checkpoint runs/m30k/final --data files:../shared/data/multi30k --split test
    echo "Ein Hund läuft." | python train_cli.py translate
    python train_cli.py average --run runs/m30k --last 5 --out runs/m30k/averaged
    torchrun --nproc_per_node=4 train_cli.py train ...      # DistributedDataParallel

Run `python train_cli.py COMMAND --help` for every option.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

DEFAULT_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "multi30k-de-en-small"
CHECKPOINT_PREFIX = "step-"


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


# ----- argument parsing -----------------------------------------------------------------
def add_decoding_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding (section 6.1: beam 4, alpha 0.6, max length = source + 50)")
    g.add_argument("--method", choices=("beam", "greedy", "sample"), default="beam")
    g.add_argument("--beam", type=int, default=4, help="beam size (default 4)")
    g.add_argument("--alpha", type=float, default=0.6, help="length penalty exponent (default 0.6)")
    g.add_argument("--length-penalty", choices=("gnmt", "plain"), default="gnmt",
                   help="gnmt: ((5+|Y|)/6)^alpha; plain: |Y|^alpha")
    g.add_argument("--max-len-a", type=float, default=1.0, help="max output length = a*|source| + b")
    g.add_argument("--max-len-b", type=int, default=50)
    g.add_argument("--min-len", type=int, default=0)
    g.add_argument("--no-repeat-ngram", type=int, default=0)
    g.add_argument("--temperature", type=float, default=1.0, help="sampling only")
    g.add_argument("--top-k", type=int, default=0, help="sampling only (0: off)")
    g.add_argument("--top-p", type=float, default=1.0, help="sampling only (1: off)")
    g.add_argument("--seed", type=int, default=None, help="sampling seed")
    g.add_argument("--batch-size", type=int, default=256,
                   help="sentences per decoding batch (default 256, the fastest on a 2-core CPU)")
    g.add_argument("--device", default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")


def decode_options(args: argparse.Namespace):
    from core.decoding import DecodeOptions

    options = DecodeOptions(method=args.method, beam_size=args.beam, alpha=args.alpha,
                            length_penalty=args.length_penalty, max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                            min_len=args.min_len, no_repeat_ngram=args.no_repeat_ngram,
                            temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                            batch_size=args.batch_size)
    options.validate()
    return options


def build_parser() -> argparse.ArgumentParser:
    from core.config import PRESETS

    parser = argparse.ArgumentParser(prog="train_cli.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train a model (CPU, GPU, or several GPUs under torchrun)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    t.add_argument("--data", required=True,
                   help="synthetic:TASK (copy, reverse, sort, numbers, dates) | files:PATH (folder of "
                        "{train,val,test}.LANG[.gz], a TSV, or SRC_FILE,TGT_FILE) | hf:NAME[:CONFIG]")
    t.add_argument("--src", help="source language code (inferred when the data has exactly two)")
    t.add_argument("--tgt", help="target language code")
    t.add_argument("--out", required=True, type=Path, help="run folder (refused if it exists, unless --resume)")
    t.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    m = t.add_argument_group("model (a preset, then overrides)")
    m.add_argument("--preset", default="small", choices=list(PRESETS))
    m.add_argument("--d-model", type=int)
    m.add_argument("--d-ff", type=int)
    m.add_argument("--heads", type=int)
    m.add_argument("--layers", type=int, help="encoder and decoder layers")
    m.add_argument("--encoder-layers", type=int)
    m.add_argument("--decoder-layers", type=int)
    m.add_argument("--dropout", type=float)
    m.add_argument("--norm-first", action="store_true", help="pre-norm instead of the paper's post-norm")
    m.add_argument("--max-len", type=int, default=256, help="longest sequence in tokens")
    m.add_argument("--vocab-size", type=int, default=8000, help="shared subword vocabulary size")
    m.add_argument("--tokenizer", choices=("bpe", "unigram", "word"), default=None,
                   help="default: word for synthetic tasks, bpe otherwise")
    o = t.add_argument_group("optimisation (section 5)")
    o.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per batch")
    o.add_argument("--accum", type=int, default=1, help="batches per optimizer step")
    o.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default 10000)")
    o.add_argument("--epochs", type=float, default=None, help="train for this many epochs instead of --max-steps")
    o.add_argument("--schedule", choices=("noam", "inverse_sqrt"), default="noam")
    o.add_argument("--warmup", type=int, default=4000)
    o.add_argument("--lr-factor", type=float, default=1.0, help="scales eq. 3's learning rate (noam)")
    o.add_argument("--lr", type=float, default=5e-4, help="peak learning rate (inverse_sqrt)")
    o.add_argument("--label-smoothing", type=float, default=0.1)
    o.add_argument("--clip-norm", type=float, default=0.0)
    o.add_argument("--weight-decay", type=float, default=0.0)
    o.add_argument("--amp", choices=("auto", "off", "bf16", "fp16"), default="auto",
                   help="auto: bf16 on CUDA and on CPUs with native bf16, else fp32")
    o.add_argument("--compile", action="store_true", help="torch.compile the training step")
    o.add_argument("--device", default="auto")
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--limit", type=int, default=None, help="use at most this many training pairs")
    r = t.add_argument_group("evaluation and saving")
    r.add_argument("--eval-every", type=int, default=1000, help="steps between validations (0: never)")
    r.add_argument("--bleu-sentences", type=int, default=200, help="validation sentences decoded for BLEU")
    r.add_argument("--save-every", type=int, default=1000, help="steps between checkpoints")
    r.add_argument("--keep-last", type=int, default=5, help="checkpoints kept (the paper averages the last 5)")
    r.add_argument("--tensorboard", action="store_true", help="also log to TensorBoard (if installed)")

    e = sub.add_parser("evaluate", help="BLEU and chrF (sacreBLEU) of a checkpoint",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    e.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    e.add_argument("--data", help="a corpus spec as for train (with --split)")
    e.add_argument("--split", choices=("valid", "test"), default="test")
    e.add_argument("--src", help="source language code")
    e.add_argument("--tgt", help="target language code")
    e.add_argument("--source-file", type=Path, help="instead of --data: sources, one per line")
    e.add_argument("--reference-file", type=Path, help="references, one per line")
    e.add_argument("--limit", type=int, help="score only the first N sentences")
    e.add_argument("--output", type=Path, help="write the hypotheses here")
    add_decoding_options(e)

    tr = sub.add_parser("translate", help="translate stdin (or --input) line by line",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    tr.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    tr.add_argument("--input", type=Path, help="input file (default: stdin)")
    tr.add_argument("--output", type=Path, help="output file (default: stdout)")
    tr.add_argument("--n-best", type=int, default=1, help="print this many hypotheses per line, tab-separated "
                                                          "with their scores")
    add_decoding_options(tr)

    a = sub.add_parser("average", help="average the last N checkpoints of a run into one",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a.add_argument("--run", type=Path, required=True, help="run folder written by `train`")
    a.add_argument("--last", type=int, default=5)
    a.add_argument("--out", type=Path, required=True, help="checkpoint folder to write")
    return parser


# ----- train --------------------------------------------------------------------------
def run_checkpoints(run: Path) -> list[Path]:
    """The step-NNNNNNN checkpoints of a run, oldest first."""
    return sorted(p for p in run.glob(f"{CHECKPOINT_PREFIX}*") if p.is_dir() and (p / "config.json").exists())


def model_overrides(args: argparse.Namespace) -> dict:
    pairs = {"d_model": args.d_model, "d_ff": args.d_ff, "n_heads": args.heads, "dropout": args.dropout,
             "encoder_layers": args.encoder_layers or args.layers,
             "decoder_layers": args.decoder_layers or args.layers}
    overrides = {k: v for k, v in pairs.items() if v is not None}
    overrides["max_len"] = args.max_len
    if args.norm_first:
        overrides["norm_first"] = True
    return overrides


def check_out_folder(out: Path, resume: bool) -> None:
    if resume:
        if not run_checkpoints(out):
            raise CLIError(f"--resume: {out} holds no checkpoint to resume from")
        return
    if out.exists():
        raise CLIError(f"{out} already exists; pass --resume to continue that run or choose another --out")
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"cannot create {out}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise CLIError(f"cannot create {out}: {parent} is not writable")


def setup_distributed():
    """(rank, world_size, device) under torchrun; (0, 1, None) otherwise."""
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, None
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = f"cuda:{local}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(local)
    return dist.get_rank(), world, device


def shared_tokenizer(corpus, args, rank: int, world: int):
    """Rank 0 learns the vocabulary; the other ranks receive it, so all hold the same one."""
    import torch.distributed as dist

    from core.tokenizer import Tokenizer

    text = None
    if rank == 0:
        kind = args.tokenizer or ("word" if args.data.startswith("synthetic:") else "bpe")
        text = Tokenizer.train((s for pair in corpus.train for s in pair), args.vocab_size, kind).to_json()
    if world > 1:
        box = [text]
        dist.broadcast_object_list(box, src=0)
        text = box[0]
    return Tokenizer.from_json(text)


def command_train(args: argparse.Namespace) -> None:
    import torch

    from core.batching import TokenBatcher, encode_pairs
    from core.bundle import ModelBundle
    from core.checkpoint import load_checkpoint, load_trainer_state
    from core.config import ModelConfig
    from core.data import load_corpus
    from core.model import Transformer
    from core.trainer import TrainConfig, Trainer

    check_out_folder(args.out, args.resume)
    rank, world, device = setup_distributed()
    corpus = load_corpus(args.data, args.src, args.tgt, seed=args.seed, limit=args.limit)
    if args.resume:
        latest = run_checkpoints(args.out)[-1]
        bundle = load_checkpoint(latest)
        wanted = ModelConfig.from_preset(args.preset, src_vocab_size=bundle.tokenizer.vocab_size,
                                         tgt_vocab_size=bundle.tokenizer.vocab_size, **model_overrides(args))
        if wanted != bundle.model.config:
            diff = {k: (v, wanted.to_dict()[k]) for k, v in bundle.model.config.to_dict().items()
                    if wanted.to_dict()[k] != v}
            raise CLIError(f"--resume: the run in {args.out} has a different model config "
                           f"(field: (run, arguments)): {diff}")
    else:
        torch.manual_seed(args.seed)
        tokenizer = shared_tokenizer(corpus, args, rank, world)
        config = ModelConfig.from_preset(args.preset, src_vocab_size=tokenizer.vocab_size,
                                         tgt_vocab_size=tokenizer.vocab_size, **model_overrides(args))
        bundle = ModelBundle(Transformer(config), tokenizer)
    bundle.info.update(name=args.out.name, src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang,
                       data=corpus.description, examples=[s for s, _ in corpus.test[:8]])
    max_len = bundle.model.config.max_len
    train, dropped = encode_pairs(corpus.train, bundle.tokenizer, max_len)
    valid, _ = encode_pairs(corpus.valid, bundle.tokenizer, max_len)
    log = print if rank == 0 else (lambda *a, **k: None)
    if dropped:
        log(f"note: {dropped} training pairs longer than {max_len} tokens were left out", file=sys.stderr)
    max_steps = args.max_steps or 10_000
    if args.epochs is not None:
        per_epoch = len(TokenBatcher(train, args.max_tokens, seed=args.seed))
        max_steps = max(1, round(args.epochs * per_epoch / (args.accum * world)))
    config = TrainConfig(max_steps=max_steps, max_tokens=args.max_tokens, accum=args.accum, schedule=args.schedule,
                         warmup=args.warmup, lr_factor=args.lr_factor, peak_lr=args.lr,
                         label_smoothing=args.label_smoothing, weight_decay=args.weight_decay,
                         clip_norm=args.clip_norm, amp=args.amp, compile=args.compile,
                         device=device or args.device, seed=args.seed, eval_every=args.eval_every,
                         bleu_sentences=args.bleu_sentences)
    trainer = Trainer(bundle, train, config, valid_pairs=corpus.valid, valid=valid)
    if args.resume:
        trainer.load_state_dict(load_trainer_state(latest))
    log(f"{bundle.model.num_parameters() / 1e6:.1f}M parameters, vocabulary {bundle.tokenizer.vocab_size}, "
        f"{len(train)} training pairs, device {trainer.device}, amp {trainer.amp_dtype or 'off'}, "
        f"{world} process(es); steps {trainer.step_count}->{max_steps}")
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "run.json").write_text(json.dumps({k: str(v) for k, v in vars(args).items()}, indent=2))
    train_loop(trainer, args, rank)


def train_loop(trainer, args: argparse.Namespace, rank: int) -> None:
    """Steps with a progress bar; metrics.jsonl, periodic checkpoints, Ctrl-C saves first."""
    from tqdm import tqdm

    board = open_tensorboard(args.out) if args.tensorboard and rank == 0 else None
    bar = tqdm(total=trainer.config.max_steps, initial=trainer.step_count, disable=rank != 0,
               unit="step", dynamic_ncols=True)
    metrics = open(args.out / "metrics.jsonl", "a") if rank == 0 else None

    def on_step(event) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{event.loss:.3f}", ppl=f"{event.perplexity:.1f}", lr=f"{event.lr:.2e}",
                        tok_s=f"{event.tokens_per_s:.0f}")
        if rank != 0:
            return
        record = {k: v for k, v in event.to_dict().items() if v is not None}
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()
        if board:
            for key in ("loss", "perplexity", "accuracy", "lr", "tokens_per_s", "grad_norm"):
                board.add_scalar(f"train/{key}", record[key], event.step)
            for key, value in (event.validation or {}).items():
                if isinstance(value, (int, float)):
                    board.add_scalar(f"valid/{key}", value, event.step)
        if event.validation:
            shown = {k: round(v, 3) for k, v in event.validation.items() if isinstance(v, float)}
            bar.write(f"step {event.step}: {shown}")
        if event.step % args.save_every == 0 or event.step == trainer.config.max_steps:
            save(trainer, args)

    try:
        trainer.run(on_step)
    except KeyboardInterrupt:
        bar.close()
        if rank == 0:
            path = save(trainer, args)
            print(f"\ninterrupted: saved {path}; continue with --resume", file=sys.stderr)
        raise SystemExit(130)
    finally:
        bar.close()
        if metrics:
            metrics.close()
    if rank == 0:
        final = args.out / "final"
        latest = run_checkpoints(args.out)[-1]
        if final.exists():
            shutil.rmtree(final)
        shutil.copytree(latest, final)
        print(f"done: {trainer.step_count} steps; final checkpoint {final}")


def save(trainer, args: argparse.Namespace) -> Path:
    path = trainer.save(args.out / f"{CHECKPOINT_PREFIX}{trainer.step_count:07d}")
    for old in run_checkpoints(args.out)[: -args.keep_last]:
        shutil.rmtree(old)
    return path


def open_tensorboard(out: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("note: TensorBoard is not installed (pip install tensorboard); logging to metrics.jsonl only",
              file=sys.stderr)
        return None
    return SummaryWriter(str(out / "tensorboard"))


# ----- evaluate / translate / average ------------------------------------------------------
def load_bundle(path: Path, device: str):
    from core.checkpoint import load_checkpoint
    from core.trainer import resolve_device

    return load_checkpoint(path, resolve_device(device))


def read_text_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CLIError(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise CLIError(f"{path} is not valid UTF-8 (byte {exc.start})") from None


def command_evaluate(args: argparse.Namespace) -> None:
    from core.data import load_corpus
    from core.evaluation import evaluate_bundle

    if args.data:
        corpus = load_corpus(args.data, args.src, args.tgt)
        pairs = corpus.test if args.split == "test" else corpus.valid
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    elif args.source_file and args.reference_file:
        sources, references = read_text_lines(args.source_file), read_text_lines(args.reference_file)
        if len(sources) != len(references):
            raise CLIError(f"{args.source_file} has {len(sources)} lines but {args.reference_file} has "
                           f"{len(references)}")
    else:
        raise CLIError("give --data (with --split) or both --source-file and --reference-file")
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    options = decode_options(args)
    bundle = load_bundle(args.checkpoint, args.device)
    started = time.perf_counter()
    result, hypotheses = evaluate_bundle(bundle, sources, references, options)
    elapsed = time.perf_counter() - started
    if args.output:
        args.output.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    print(f"{bundle.name}: {len(sources)} sentences, {options.method}"
          f"{f' {options.beam_size}' if options.method == 'beam' else ''}, {elapsed:.1f} s")
    print(f"BLEU = {result.bleu:.2f}   {result.bleu_signature}")
    print(f"chrF = {result.chrf:.2f}   {result.chrf_signature}")


def command_translate(args: argparse.Namespace) -> None:
    from core.decoding import translate_detailed

    options = decode_options(args)
    if args.n_best > 1:
        if options.method != "beam" or args.n_best > options.beam_size:
            raise CLIError(f"--n-best {args.n_best} needs --method beam with --beam >= {args.n_best}")
        options.n_best = args.n_best
    lines = read_text_lines(args.input) if args.input else sys.stdin.read().splitlines()
    bundle = load_bundle(args.checkpoint, args.device)
    results = translate_detailed(bundle, lines, options)
    for r in results:
        for notice in r.notices:
            print(f"note: {notice}", file=sys.stderr)
    if args.n_best > 1:
        out = ["\t".join(f"{text}\t{score:.4f}" for text, score in r.n_best) for r in results]
    else:
        out = [r.text for r in results]
    text = "\n".join(out) + ("\n" if out else "")
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def command_average(args: argparse.Namespace) -> None:
    import torch

    from core.checkpoint import load_checkpoint, save_checkpoint

    found = run_checkpoints(args.run)
    if not found:
        raise CLIError(f"{args.run} holds no {CHECKPOINT_PREFIX}* checkpoints")
    if args.last < 1:
        raise CLIError(f"--last must be >= 1, got {args.last}")
    chosen = found[-args.last:]
    bundles = [load_checkpoint(p) for p in chosen]
    reference = bundles[0].model.config
    for path, b in zip(chosen, bundles):
        if b.model.config != reference:
            raise CLIError(f"{path} has a different model config from {chosen[0]}; cannot average")
    average = bundles[-1]
    states = [b.model.state_dict() for b in bundles]
    with torch.no_grad():
        for name, tensor in average.model.state_dict().items():
            tensor.copy_(sum(s[name] for s in states) / len(states))
    average.info["averaged_from"] = [p.name for p in chosen]
    save_checkpoint(args.out, average)
    print(f"averaged {len(chosen)} checkpoints ({chosen[0].name} .. {chosen[-1].name}) into {args.out}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from core.trainer import TrainingStopped

    commands = {"train": command_train, "evaluate": command_evaluate, "translate": command_translate,
                "average": command_average}
    try:
        commands[args.command](args)
    except (CLIError, ValueError, OSError, TrainingStopped) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
