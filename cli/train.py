"""`train`: a new run prepared by core.training.prepare (or a resumed one), notes on what it will not see as given,
then the training loop. Under torchrun every process prepares the same run; rank 0 learns the
vocabulary and writes the run folder."""
from __future__ import annotations

import argparse
import os
import re
import sys
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist

from core.bundle import ModelBundle
from core.data.batching import TokenBatcher
from core.data.corpus import ParallelCorpus
from core.data.files import UNNAMED, absolute_spec
from core.data.tokenizer import Tokenizer
from core.training.acceleration import native_bf16_cpu
from core.training.keep_best import check_keep_best
from core.training.prepare import RunNotes, RunPlan, learn_tokenizers, prepare_run
from core.training.recipes import get_recipe
from core.training.trainer import TrainConfig, Trainer

from .args import command_parser
from .common import CHECKPOINT_PREFIX, CLIError, check_creatable, run_checkpoints
from .loop import Saving, train_loop
from .resume import SPLIT_OPTIONS, check_same_data, restore_trainer, resumed_bundle
from .run_record import RUN_RECORD, data_fingerprint, run_record, write_run_record
from .warm_start import warm_bundle, warm_up_trainer


def command_train(args: argparse.Namespace) -> None:
    check_out_folder(args.out, args.resume)  # first: a mistyped --resume folder is the problem to name
    if args.resume and args.warm_start and "warm_start" not in args.from_run:
        raise CLIError("--resume and --warm-start: a resume goes on from the run's own latest checkpoint; give one")
    record = run_record(args.out) if args.resume else {}
    check_data_given(args, record)
    check_vocabulary_options(args)
    # Before any data is read: the metric must be one the run will measure.
    check_keep_best(args.keep_best, args.patience, eval_every=args.eval_every, bleu_sentences=args.bleu_sentences,
                    synthetic=args.data.startswith("synthetic:"))
    args.data = absolute_spec(args.data)  # run.json's record then reads the same files from any folder
    if args.also_train_on:
        args.also_train_on = absolute_spec(args.also_train_on)
    if args.resume:
        check_same_data({key: getattr(args, key) for key in (*SPLIT_OPTIONS, "max_tokens")}, record)
    rank, world, device = setup_distributed()
    plan = run_plan(args)
    latest = run_checkpoints(args.out)[-1] if args.resume else None
    warm = None if latest else args.warm_start  # a warm-started run resumed goes on from its own checkpoints
    resume = (lambda corpus: resumed_bundle(args.out, plan, record, corpus, latest)) if latest else None
    if warm:
        resume = partial(warm_bundle, warm, plan)
    prepared = prepare_run(plan, max_tokens=args.max_tokens, device=device or args.device,
                           info={"name": args.out.name}, resume=resume,
                           learn=lambda corpus, plan: learnt_tokenizers(corpus, plan, rank, world))
    corpus, bundle, train, valid = prepared.corpus, prepared.bundle, prepared.train, prepared.valid
    fingerprint = data_fingerprint(corpus)
    log = print if rank == 0 else (lambda *a, **k: None)
    if args.valid_fraction is not None and "valid" not in corpus.description.get("carved", {}):
        log(f"note: --valid-fraction has no effect: {args.data} has a validation split of its own", file=sys.stderr)
    note_data(args, prepared.notes, bundle, len(train), log)
    # The config first: its check of a bad option (--label-smoothing 1) comes before any note on the run.
    config = train_config(args, train, world, device)
    note_unused_rate(args, log)
    trainer = Trainer(bundle, train, config, valid_pairs=corpus.valid, valid=valid)
    if latest:
        restore_trainer(trainer, args.out, latest, rank)
    elif warm:
        warm_up_trainer(trainer, warm)
    note_slow_cpu(args, trainer, log)
    note_run(args, corpus, trainer, len(train), world, log)
    if rank == 0:
        write_run_record(command_parser("train"), args, fingerprint)
    train_loop(trainer, Saving(args.out, args.save_every, args.keep_last, args.tensorboard), rank)


def run_plan(args: argparse.Namespace) -> RunPlan:
    """The run the options ask for, as core.training.prepare prepares it."""
    return RunPlan(args.data, args.src, args.tgt, seed=args.seed, limit=args.limit,
                   valid_fraction=args.valid_fraction, preset=args.preset,
                   model_overrides=model_overrides(args), vocab_size=args.vocab_size, tokenizer_kind=args.tokenizer,
                   separate_vocab=args.separate_vocab, src_vocab_size=args.src_vocab_size,
                   tgt_vocab_size=args.tgt_vocab_size, both_directions=args.both_directions,
                   also_train_on=args.also_train_on)


def model_overrides(args: argparse.Namespace) -> dict:
    pairs = {"d_model": args.d_model, "d_ff": args.d_ff, "n_heads": args.heads, "d_k": args.d_k,
             "dropout": args.dropout,
             "encoder_layers": args.encoder_layers or args.layers,
             "decoder_layers": args.decoder_layers or args.layers}
    overrides = {k: v for k, v in pairs.items() if v is not None}
    overrides["max_len"] = args.max_len
    overrides["positional"] = args.positional
    if args.norm_first:
        overrides["norm_first"] = True
    if args.attention_bias:
        overrides["attention_bias"] = True
    return overrides


def check_out_folder(out: Path, resume: bool) -> None:
    never_saved = (f"it holds no {CHECKPOINT_PREFIX}* checkpoint (a run that stopped before its first save?); "
                   f"remove it to start again, or choose another --out")
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file; give a folder for the run")
    if resume:
        if not out.is_dir():
            raise CLIError(f"--resume: {out} does not exist; leave out --resume to start a new run there")
        if not run_checkpoints(out):
            raise CLIError(f"--resume: nothing to resume in {out}: {never_saved}")
        return
    if out.exists():
        if out.is_dir() and not run_checkpoints(out):
            raise CLIError(f"{out} already exists and {never_saved}")
        raise CLIError(f"{out} already exists; pass --resume to continue that run or choose another --out")
    check_creatable(out)


def check_data_given(args: argparse.Namespace, record: dict) -> None:
    if args.data is None:
        kept = ""
        if args.resume:
            kept = (f" ({args.out / RUN_RECORD} holds none to resume with)" if record
                    else f" (there is no readable {args.out / RUN_RECORD} to take the run's from)")
        raise CLIError(f"train needs --data{kept} (see --help for its forms)")


def check_vocabulary_options(args: argparse.Namespace) -> None:
    sizes = (("--src-vocab-size", args.src_vocab_size), ("--tgt-vocab-size", args.tgt_vocab_size))
    given = [flag for flag, value in sizes if value is not None]
    if given and not args.separate_vocab:
        raise CLIError(f"{' and '.join(given)} size{'s' * (len(given) == 1)} a separate vocabulary: add "
                       f"--separate-vocab, or give --vocab-size for the shared one")


def setup_distributed():
    """(rank, world_size, device) under torchrun; (0, 1, None) otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, None
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    per_node, gpus = int(os.environ.get("LOCAL_WORLD_SIZE", local + 1)), torch.cuda.device_count()
    if backend == "nccl" and per_node > gpus:  # else "invalid device ordinal" inside the first copy to a GPU
        raise CLIError(f"torchrun started {per_node} processes on a machine with {gpus} GPU(s): NCCL needs "
                       f"a GPU per process, --nproc_per_node={gpus} or fewer")
    dist.init_process_group(backend)
    device = f"cuda:{local}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(local)
    return dist.get_rank(), world, device


def learnt_tokenizers(corpus: ParallelCorpus, plan: RunPlan, rank: int,
                      world: int) -> tuple[Tokenizer, Tokenizer | None]:
    """Rank 0 learns the vocabulary (or, with --separate-vocab, the two); the other ranks receive them, so all
    hold the same ones."""
    texts = refusal = None
    if rank == 0:
        try:
            texts = [t.to_json() if t else None for t in learn_tokenizers(corpus, plan)]
        except ValueError as exc:  # core names its argument; here it is an option
            refusal = re.sub(r"^(src_|tgt_)?vocab_size\b", lambda m: f"--{(m[1] or '').replace('_', '-')}vocab-size",
                             str(exc))
    if world > 1:  # the refusal too: the other ranks would wait for the vocabulary for ever
        box = [texts, refusal]
        dist.broadcast_object_list(box, src=0)
        texts, refusal = box
    if refusal:
        raise CLIError(refusal)
    source, target = texts
    return Tokenizer.from_json(source), Tokenizer.from_json(target) if target else None


def note_data(args: argparse.Namespace, notes: RunNotes, bundle: ModelBundle, pairs: int, log) -> None:
    """A note on each thing the run will not see as given (core.training.prepare's notes): pairs left out (an empty
    side, too long), words the vocabulary lacks, pairs over --max-tokens."""
    if notes.dropped_empty:
        log(f"note: {notes.dropped_empty}", file=sys.stderr)
    if notes.too_long:
        log(f"note: {notes.too_long} training pairs longer than {notes.max_len} tokens were left out", file=sys.stderr)
    if notes.many_unknown and not args.resume:  # a resumed run keeps its vocabulary
        advice = ("they are words seen only once in the training data; --tokenizer bpe writes such words in pieces"
                  if notes.unknown_from_rare_words else "give a larger --vocab-size")
        log(f"note: {notes.unknown_share:.0%} of the training tokens are <unk>: a vocabulary of "
            f"{vocabulary_sizes(bundle)} ({bundle.tokenizer.kind}) does not cover this data, and the model "
            f"would learn to write <unk>; {advice}", file=sys.stderr)
    if notes.over_max_tokens and "max_tokens" not in args.from_run:
        log(f"note: {notes.over_max_tokens} of {pairs} training pairs are longer than --max-tokens "
            f"{args.max_tokens} tokens, so each of them is a batch of its own (slow); the budget counts a batch's "
            f"padded tokens, and a few thousand batches many sentences", file=sys.stderr)


def vocabulary_sizes(bundle: ModelBundle) -> str:
    """The shared vocabulary's size, or the two sizes of separate ones."""
    if bundle.separate_target is None:
        return str(bundle.tokenizer.vocab_size)
    return f"{bundle.tokenizer.vocab_size} source / {bundle.separate_target.vocab_size} target"


def train_config(args: argparse.Namespace, train: list, world: int, device: str | None) -> TrainConfig:
    max_steps = 10_000 if args.max_steps is None else args.max_steps
    if args.epochs is not None:
        per_epoch = len(TokenBatcher(train, args.max_tokens, seed=args.seed, bucket=args.bucket))
        max_steps = max(1, round(args.epochs * per_epoch / (args.accum * world)))
    return TrainConfig(max_steps=max_steps, max_tokens=args.max_tokens, accum=args.accum, schedule=args.schedule,
                       warmup=args.warmup, lr_factor=args.lr_factor, peak_lr=args.lr,
                       label_smoothing=args.label_smoothing, weight_decay=args.weight_decay,
                       clip_norm=args.clip_norm, amp=args.amp, compile=args.compile, bucket=args.bucket,
                       cuda_graphs=args.cuda_graphs, readback_every=args.readback_every,
                       device=device or args.device, seed=args.seed, eval_every=args.eval_every,
                       bleu_sentences=args.bleu_sentences, keep_best=args.keep_best, patience=args.patience)


def note_unused_rate(args: argparse.Namespace, log) -> None:
    """--lr with the noam schedule, or --lr-factor with another, changes nothing: say so."""
    unused, instead = (("lr", "--lr-factor scales eq. 3's rate") if args.schedule == "noam"
                       else ("lr_factor", "--lr sets its peak"))
    if getattr(args, unused) != command_parser("train").get_default(unused) and unused not in args.from_run:
        log(f"note: --{unused.replace('_', '-')} has no effect with --schedule {args.schedule} ({instead}); "
            f"it is ignored", file=sys.stderr)


def note_slow_cpu(args: argparse.Namespace, trainer, log) -> None:
    """Said before the first step, which may be minutes away: a recipe sized for a GPU run on a CPU, and bf16
    where the CPU only emulates it."""
    if trainer.device.type != "cpu":
        return
    if args.recipe and get_recipe(args.recipe).sized_for_gpu:
        recipe = get_recipe(args.recipe)
        log(f"note: the {recipe.name} recipe is sized for a GPU ({recipe.duration}); --max-steps and --max-tokens "
            f"shorten it", file=sys.stderr)
    if trainer.amp_dtype == torch.bfloat16 and not native_bf16_cpu():
        log("note: --amp bf16 is emulated on this CPU, which lacks native bf16 (AVX512-BF16): several times slower "
            "than fp32 (5.3x on an AVX2 CPU); --amp auto trains in fp32 here", file=sys.stderr)


def note_run(args: argparse.Namespace, corpus, trainer, pairs: int, world: int, log) -> None:
    """The run's last notes (a warmup past its end, unnamed languages) and its summary lines."""
    max_steps, bundle = trainer.config.max_steps, trainer.bundle
    # After a resume's refusals; not again on a resume that keeps the run's --warmup and --max-steps.
    if args.warmup > max_steps and not {"warmup", "max_steps"} <= args.from_run:
        log(f"note: --warmup {args.warmup} is longer than the run ({max_steps} step{'s' * (max_steps != 1)}): the "
            f"learning rate rises throughout and never reaches its peak", file=sys.stderr)
    amp = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(trainer.amp_dtype, "off")
    if (corpus.src_lang, corpus.tgt_lang) == UNNAMED and not args.resume:
        log("note: the data names no languages, so the checkpoint calls them src and tgt, and evaluate or "
            "translate cannot check a direction against it; name them: files:PATH:LANG1-LANG2 for a TSV "
            "(column 1's language, then column 2's), --src and --tgt for two text files", file=sys.stderr)
    inferred = not (args.src or args.tgt or args.resume or args.data.startswith("synthetic:")
                    or (corpus.src_lang, corpus.tgt_lang) == UNNAMED)
    chosen = " (inferred from the data; --src/--tgt choose)" if inferred else ""
    log(f"{corpus.src_lang}→{corpus.tgt_lang}{chosen}, "
        f"{bundle.model.num_parameters() / 1e6:.1f}M parameters, vocabulary {vocabulary_sizes(bundle)}, "
        f"{pairs} training pairs, device {trainer.device}, amp {amp}, "
        f"{world} process(es); steps {trainer.step_count}->{max_steps}")
    log(f"loss: label-smoothed cross-entropy per target token (section 5.4, eps {trainer.config.label_smoothing}); "
        f"ppl: exp of the unsmoothed one, the reference tokens' perplexity")
