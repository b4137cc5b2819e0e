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
import contextlib
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from core import __version__
from core.batching import TOO_MANY_UNKNOWN, TokenBatcher, encode_pairs, unknown_from_rare_words, unknown_share
from core.bundle import ModelBundle, check_fits, resolve_device
from core.checkpoint import (
    FILES, OPTIONAL_FILES, average_checkpoints, copy_checkpoint, load_checkpoint, load_trainer_state, save_checkpoint,
)
from core.config import INT64_MAX, PRESETS, ModelConfig
from core.data import (
    UNNAMED, absolute_spec, decode_lines, dropped_empty_note, load_corpus, local_files, read_lines, split_lines,
)
from core.decoding import LENGTH_PENALTIES, METHODS, SAMPLE_TEMPERATURE, SAMPLE_TOP_P, DecodeOptions
from core.evaluation import evaluate_bundle
from core.model import Transformer
from core.schedule import SCHEDULES
from core.tokenizer import KINDS, Tokenizer
from core.trainer import AMP_MODES, TrainConfig, Trainer, TrainingStopped
from core.translation import translate_detailed

DEFAULT_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "multi30k-de-en-small"
CHECKPOINT_PREFIX = "step-"
PROG = "train_cli.py"


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default: "off" for a flag, nothing where there is none (None)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if not action.option_strings or action.default is None or action.default is argparse.SUPPRESS:
            return help_text
        if action.default is False:  # `is`: a default of 0 equals False but is a number
            return help_text + " (default: off)"
        return help_text + " (default: %(default)s)"


def refusal(message: str, command: str) -> str:
    """One style for every refusal, argparse's or a command's: what was wrong, and where the options are
    listed when an option was (core's checks of --beam 0 and --top-p 1.5 read as argparse's do)."""
    prog = f"{PROG} {command.strip()}".strip()
    options = (message.startswith(("argument ", "unrecognized arguments", "the following arguments", "-"))
               and not re.match(r"argument \d+:", message))  # a sentence given as an argument, not an option
    hint = f"\n(`{prog} --help` lists every option)" if options else ""
    return f"{prog}: error: {message}{hint}"


class Parser(argparse.ArgumentParser):
    """argparse, refusing in two lines (what was wrong, where to look) instead of the whole usage."""

    def error(self, message: str):
        self.exit(2, refusal(message, self.prog.removeprefix(PROG)) + "\n")


def number(kind: type, rule: str, ok):
    """An argparse type: a `kind` (int or float) for which ok(value) holds, else the rule in words."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}") from None
        if not (math.isfinite(value) and ok(value)):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value
    return parse


POSITIVE_INT = number(int, "an integer >= 1", lambda v: v >= 1)
NON_NEGATIVE_INT = number(int, "an integer >= 0", lambda v: v >= 0)
POSITIVE_NUMBER = number(float, "a number > 0", lambda v: v > 0)
NON_NEGATIVE_NUMBER = number(float, "a number >= 0", lambda v: v >= 0)
SEED = number(int, "an integer from 0 to 2**63 - 1", lambda v: 0 <= v <= INT64_MAX)  # what torch.manual_seed takes


def device_name(text: str) -> str:
    """An argparse type: auto, or a device this machine has (refused with the option's name)."""
    if text == "auto":
        return text
    try:
        resolve_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


# ----- argument parsing -----------------------------------------------------------------
def add_decoding_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding (section 6.1: beam 4, alpha 0.6, max length = source + 50)")
    g.add_argument("--method", choices=METHODS, default="beam",
                   help="beam search, greedy decoding or sampling")
    g.add_argument("--beam", type=POSITIVE_INT, default=4, help="beam size")
    g.add_argument("--alpha", type=float, default=0.6, help="length penalty exponent, 0 to 10")
    g.add_argument("--length-penalty", choices=LENGTH_PENALTIES, default="gnmt",
                   help="gnmt: ((5+|Y|)/6)^alpha; plain: |Y|^alpha")
    g.add_argument("--max-len-a", type=NON_NEGATIVE_NUMBER, default=1.0,
                   help="max output length in tokens = a*|source| + b, end of sentence included")
    g.add_argument("--max-len-b", type=NON_NEGATIVE_INT, default=50, help="see --max-len-a")
    g.add_argument("--min-len", type=NON_NEGATIVE_INT, default=0, help="no end of sentence before this many tokens")
    g.add_argument("--no-repeat-ngram", type=NON_NEGATIVE_INT, default=0,
                   help="n: no n-gram occurs twice in an output (0: off)")
    # The studio's starting point: the plain distribution (1 and 1) reads as nonsense (core.decoding).
    g.add_argument("--temperature", type=POSITIVE_NUMBER, default=SAMPLE_TEMPERATURE,
                   help="sampling only, > 0 (1: the model's own distribution)")
    g.add_argument("--top-k", type=NON_NEGATIVE_INT, default=0, help="sampling only (0: off)")
    g.add_argument("--top-p", type=float, default=SAMPLE_TOP_P, help="sampling only, in (0, 1] (1: off)")
    g.add_argument("--seed", type=SEED, default=None, help="sampling seed (default: a fresh one)")
    g.add_argument("--batch-size", type=POSITIVE_INT, default=None,
                   help="sentences decoded together (default: 1024 for greedy and sampling, 256 for beam "
                        "search, the fastest on a 2-core CPU)")
    g.add_argument("--device", type=device_name, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")


def decode_options(args: argparse.Namespace):
    options = DecodeOptions(method=args.method, beam_size=args.beam, alpha=args.alpha,
                            length_penalty=args.length_penalty, max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                            min_len=args.min_len, no_repeat_ngram=args.no_repeat_ngram,
                            temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                            batch_size=args.batch_size)
    options.validate()
    note_unused_decoding_options(args)
    return options


BEAM_ONLY = ("beam", "alpha", "length_penalty")
SAMPLING_ONLY = ("temperature", "top_k", "top_p", "seed")


def note_unused_decoding_options(args: argparse.Namespace) -> None:
    """A beam option with greedy decoding, a sampling one with beam search: said, not silently ignored."""
    unused = {"beam": SAMPLING_ONLY, "greedy": BEAM_ONLY + SAMPLING_ONLY, "sample": BEAM_ONLY}[args.method]
    parser = build_parser().commands[args.command]
    given = [f"--{dest.replace('_', '-')}" for dest in unused if getattr(args, dest) != parser.get_default(dest)]
    if given:
        print(f"note: {', '.join(given)} {'has' if len(given) == 1 else 'have'} no effect with --method "
              f"{args.method}; ignored", file=sys.stderr)


MODEL_FLAGS = {"d_model": "--d-model", "d_ff": "--d-ff", "n_heads": "--heads", "dropout": "--dropout",
               "encoder_layers": "--encoder-layers", "decoder_layers": "--decoder-layers",
               "max_len": "--max-len", "norm_first": "--norm-first", "attention_bias": "--attention-bias"}


def option_names(message: str, command: str) -> str:
    """Core's messages name fields (DecodeOptions.beam_size, n_heads); the user typed options (--beam, --heads).
    Only fields the command has an option for are renamed, and a model's fields only in core's check of the
    model `train` builds from its options: a message about a checkpoint starts with its path and names
    that file's fields (ModelConfig.attention_dropout, which no command has an option for)."""
    flags = {action.dest: action.option_strings[0]
             for action in build_parser().commands[command]._actions if action.option_strings}
    aliases = {"beam_size": "--beam", "peak_lr": "--lr"}
    flags.update({field: flag for field, flag in aliases.items() if flag in flags.values()})
    renamed = re.sub(r"\b(?:DecodeOptions|TrainConfig)\.(\w+)", lambda m: flags.get(m[1], m[0]), message)
    if command == "train" and message.startswith("ModelConfig."):
        renamed = re.sub(r"\bModelConfig\.(\w+)", lambda m: MODEL_FLAGS.get(m[1], m[0]), renamed)
        bare = r"(?<![-\w./])(?:" + "|".join(MODEL_FLAGS) + r")\b"
        renamed = re.sub(bare, lambda m: MODEL_FLAGS[m[0]], renamed)
    return renamed


EXAMPLES = {
    "train": """examples:
  python train_cli.py train --preset small --data files:../shared/data/multi30k --src de --tgt en --out runs/m30k
  python train_cli.py train --out runs/m30k --resume --max-steps 20000     # go on, with the run's options
  python train_cli.py train --preset tiny --data synthetic:reverse --max-steps 1000 --max-tokens 1500 \\
      --schedule inverse_sqrt --lr 7e-4 --warmup 100 --clip-norm 1.0 --out runs/reverse   # a minute on a CPU
  torchrun --nproc_per_node=4 train_cli.py train --preset paper-base --data files:DATA --out runs/base""",
    "evaluate": """examples:
  python train_cli.py evaluate --checkpoint runs/m30k/final --data files:../shared/data/multi30k --split test
  python train_cli.py evaluate --source-file test.de --reference-file test.en --method greedy --output hyp.en""",
    "translate": """examples:
  python train_cli.py translate "Ein Hund läuft über die Wiese." "Zwei Männer spielen Fußball."
  echo "Ein Hund läuft über die Wiese." | python train_cli.py translate
  python train_cli.py translate --checkpoint runs/m30k/final --input test.de --output test.en
  python train_cli.py translate --beam 8 --n-best 3 < sentences.de""",
    "average": """example:
  python train_cli.py average --run runs/m30k --last 5 --out runs/m30k/averaged""",
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=__doc__, formatter_class=HelpFormatter)
    cuda = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
    parser.add_argument("--version", action="version",
                        version=f"Transformer Studio {__version__} (torch {torch.__version__}, {cuda})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = sub.choices  # so that a command's unknown option is refused by that command

    t = sub.add_parser("train", help="train a model (CPU, GPU, or several GPUs under torchrun)",
                       description="Train a model; Ctrl-C saves a checkpoint first.", formatter_class=HelpFormatter,
                       epilog=EXAMPLES["train"])
    t.add_argument("--data",
                   help="required (with --resume: the run's): synthetic:TASK (copy, reverse, sort, numbers, "
                        "dates) | files:PATH (folder of {train,val,test}.LANG[.gz], SRC_FILE,TGT_FILE, or a TSV: "
                        "files:PATH.tsv[.gz]:LANG1-LANG2 names its columns' languages) | hf:NAME[:CONFIG]")
    t.add_argument("--src", help="source language code (inferred when the data has exactly two)")
    t.add_argument("--tgt", help="target language code (inferred, like --src)")
    t.add_argument("--out", required=True, type=Path, help="run folder (refused if it exists, unless --resume)")
    t.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its latest checkpoint, with the run's options (run.json) "
                        "except those given again")
    m = t.add_argument_group("model (a preset, then overrides)")
    m.add_argument("--preset", default="small", choices=list(PRESETS), help="model size (core/config.py)")
    m.add_argument("--d-model", type=POSITIVE_INT, help="model width (default: the preset's)")
    m.add_argument("--d-ff", type=POSITIVE_INT, help="feed-forward width (default: the preset's)")
    m.add_argument("--heads", type=POSITIVE_INT, help="attention heads (default: the preset's)")
    m.add_argument("--layers", type=POSITIVE_INT, help="encoder and decoder layers (default: the preset's)")
    m.add_argument("--encoder-layers", type=POSITIVE_INT, help="encoder layers (default: --layers)")
    m.add_argument("--decoder-layers", type=POSITIVE_INT, help="decoder layers (default: --layers)")
    m.add_argument("--dropout", type=float, help="residual dropout (default: the preset's)")
    m.add_argument("--norm-first", action="store_true", help="pre-norm instead of the paper's post-norm")
    m.add_argument("--attention-bias", action="store_true",
                   help="a bias on each attention projection, as fairseq has (the paper's W^Q, W^K, W^V, W^O have none)")
    # <bos> and <eos> take two positions; the vocabulary holds the 4 special tokens and at least one more.
    m.add_argument("--max-len", type=number(int, "an integer >= 2", lambda v: v >= 2), default=256,
                   help="longest sequence in tokens")
    m.add_argument("--vocab-size", type=number(int, "an integer >= 5", lambda v: v >= 5), default=8000,
                   help="shared subword vocabulary size")
    m.add_argument("--tokenizer", choices=KINDS, default=None,
                   help="how text becomes tokens: bpe or unigram subwords (--vocab-size of them), or whole words "
                        "(default: word for synthetic tasks, bpe otherwise)")
    o = t.add_argument_group("optimisation (section 5)")
    o.add_argument("--max-tokens", type=POSITIVE_INT, default=4096,
                   help="padded tokens per batch, per process under torchrun (the paper's steps held about 25000 "
                        "per side: reach that with --accum or more processes)")
    o.add_argument("--accum", type=POSITIVE_INT, default=1, help="batches per optimizer step")
    length = o.add_mutually_exclusive_group()
    length.add_argument("--max-steps", type=POSITIVE_INT, default=None, help="optimizer steps (default: 10000)")
    length.add_argument("--epochs", type=POSITIVE_NUMBER, default=None,
                        help="train for this many epochs instead of --max-steps (default: off)")
    o.add_argument("--schedule", choices=SCHEDULES, default="noam",
                   help="noam: eq. 3; inverse_sqrt: fairseq's, peaking at --lr")
    o.add_argument("--warmup", type=POSITIVE_INT, default=4000, help="warm-up steps")
    o.add_argument("--lr-factor", type=POSITIVE_NUMBER, default=1.0, help="scales eq. 3's learning rate (noam)")
    o.add_argument("--lr", type=POSITIVE_NUMBER, default=5e-4, help="peak learning rate (inverse_sqrt)")
    o.add_argument("--label-smoothing", type=float, default=0.1, help="section 5.4, in [0, 1)")
    o.add_argument("--clip-norm", type=NON_NEGATIVE_NUMBER, default=0.0, help="gradient norm clipping (0: off)")
    o.add_argument("--weight-decay", type=NON_NEGATIVE_NUMBER, default=0.0, help="weight decay, decoupled from Adam's update (AdamW, as fairseq's Adam; the paper uses none)")
    o.add_argument("--amp", choices=AMP_MODES, default="auto",
                   help="auto: bf16 on CUDA (fp16 on a GPU without bf16) and on CPUs with native bf16, else fp32")
    o.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="torch.compile the training step, for long GPU runs: its first steps compile for a minute "
                        "or two (README: what it gave on an H100); --no-compile: off, e.g. resuming such a run")
    o.add_argument("--device", type=device_name, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    o.add_argument("--seed", type=SEED, default=0, help="initialisation, batch order and data split")
    o.add_argument("--limit", type=POSITIVE_INT, default=None,
                   help="use at most this many training pairs, a seeded sample (default: all)")
    r = t.add_argument_group("evaluation and saving")
    r.add_argument("--eval-every", type=NON_NEGATIVE_INT, default=1000, help="steps between validations (0: never)")
    r.add_argument("--bleu-sentences", type=NON_NEGATIVE_INT, default=200,
                   help="validation sentences decoded for BLEU (0: no BLEU)")
    r.add_argument("--save-every", type=POSITIVE_INT, default=1000, help="steps between checkpoints")
    r.add_argument("--keep-last", type=POSITIVE_INT, default=5, help="checkpoints kept (the paper averages the last 5)")
    r.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=False,
                   help="also log to TensorBoard (if installed)")

    e = sub.add_parser("evaluate", help="BLEU and chrF (sacreBLEU) of a checkpoint",
                       description="BLEU and chrF (sacreBLEU, detokenized) of a checkpoint's translations.",
                       formatter_class=HelpFormatter, epilog=EXAMPLES["evaluate"])
    e.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="checkpoint folder")
    e.add_argument("--data", help="a corpus spec as for train (with --split)")
    e.add_argument("--split", choices=("valid", "test"), default="test",
                   help="which part of --data (a corpus without splits: the 1%% carved out as in training)")
    e.add_argument("--src", help="source language code (default: the checkpoint's)")
    e.add_argument("--tgt", help="target language code (default: the checkpoint's)")
    e.add_argument("--source-file", type=Path, help="instead of --data: sources, one per line")
    e.add_argument("--reference-file", type=Path, help="references, one per line")
    e.add_argument("--limit", type=POSITIVE_INT, help="score only the first N sentences (default: all)")
    e.add_argument("--output", type=Path, help="write the hypotheses here, one per line (default: not written)")
    add_decoding_options(e)

    tr = sub.add_parser("translate", help="translate sentences: arguments, --input or stdin, one per line",
                        description="Translate the sentences given as arguments, or --input's or stdin's lines\n"
                                    "(typed at a terminal: each as soon as Enter is pressed).",
                        formatter_class=HelpFormatter, epilog=EXAMPLES["translate"])
    tr.add_argument("sentences", nargs="*",
                    help="sentences to translate, each in quotes (default: --input, else stdin)")
    tr.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT, help="checkpoint folder")
    tr.add_argument("--input", type=Path, help="input file, one sentence per line (default: stdin)")
    tr.add_argument("--output", type=Path, help="output file (default: stdout)")
    tr.add_argument("--n-best", type=POSITIVE_INT, default=1,
                    help="print this many hypotheses per line, tab-separated with their scores (2 x N columns)")
    add_decoding_options(tr)

    a = sub.add_parser("average", help="average the last N checkpoints of a run into one",
                       description="Average the weights of a run's last N checkpoints (the paper averages 5).",
                       formatter_class=HelpFormatter, epilog=EXAMPLES["average"])
    a.add_argument("--run", type=Path, required=True, help="run folder written by `train`")
    a.add_argument("--last", type=POSITIVE_INT, default=5, help="how many of the latest checkpoints")
    a.add_argument("--out", type=Path, required=True, help="checkpoint folder to write (refused if it exists)")
    return parser


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse would answer with the top-level usage, which does not list the command's options
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "train" and args.resume:
        args = with_run_options(parser, args, argv)
    return args


def run_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The train options that args holds, defaults left out: run.json keeps them for --resume."""
    options = []
    for action in parser.commands["train"]._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or action.dest in ("help", "out", "resume") or value == action.default:
            continue
        options += [action.option_strings[0]] if value is True else [action.option_strings[0], str(value)]
    return options


def with_run_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     argv: list[str] | None) -> argparse.Namespace:
    """--resume: options not given again are the run's own, so `train --out RUN --resume` goes on as it was."""
    record = args.out / "run.json"
    if not args.out.is_dir():
        return args  # command_train names what --out is instead
    try:
        saved = json.loads(record.read_text())["options"]
    except (FileNotFoundError, KeyError):
        return args  # a run folder from before run.json kept options: what was given is all there is
    except (OSError, ValueError, TypeError) as exc:
        print(f"note: {record} cannot be read ({type(exc).__name__}: {exc}); resuming with the options given "
              f"here only", file=sys.stderr)
        return args
    if args.max_steps is not None or args.epochs is not None:  # a new length replaces the run's, of either kind
        length = {"--max-steps", "--epochs"}
        saved = [v for i, v in enumerate(saved) if v not in length and (i == 0 or saved[i - 1] not in length)]
    given = list(sys.argv[1:] if argv is None else argv)
    merged = parser.parse_args([given[0], *saved, *given[1:]])  # the later of two values wins
    again = vars(parser.parse_args(given))
    # The run's own options, not given this time: their notes were given when the run began.
    merged.from_run = {k for k, v in vars(merged).items() if v != again[k]}
    return merged


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


SPLIT_OPTIONS = ("seed", "limit", "vocab_size")  # the tokenizer's kind and the direction: from the checkpoint


def run_record(out: Path) -> dict:
    """The run.json of a run folder ({} when missing or unreadable: nothing to compare with)."""
    try:
        record = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def check_same_data(args: argparse.Namespace, record: dict) -> None:
    """--resume: the options that chose the training pairs, the carved valid/test split and the vocabulary
    stay the run's (another --seed would put the run's held-out pairs into training)."""
    def changed(keys: tuple[str, ...]) -> list[str]:
        return [f"--{key.replace('_', '-')} {getattr(args, key)} (the run's: {record[key]})" for key in keys
                if key in record and str(getattr(args, key)) != record[key]]

    refuse_changes(changed(SPLIT_OPTIONS), "the run's data split and vocabulary come from its own values")
    # The batcher's saved place is a place in the run's own batches, which --max-tokens cut.
    refuse_changes(changed(("max_tokens",)), "a resume takes the run's batches up where it stopped, and they "
                                              "were cut to the run's size")


def data_fingerprint(corpus) -> str:
    """A digest of the training and validation pairs, which run.json keeps: --resume with data that has
    moved reads the same pairs (taken), another corpus or task does not (refused)."""
    digest = hashlib.sha256()
    for src, tgt in corpus.train + corpus.valid:
        digest.update(f"{src}\t{tgt}\n".encode())
    return digest.hexdigest()[:16]


def check_same_pairs(args: argparse.Namespace, record: dict, fingerprint: str) -> None:
    """--resume: the data must hold the run's pairs (fingerprint: data_fingerprint of the corpus read now);
    a new --data path is taken if it does (moved data)."""
    if not record.get("data"):
        return
    # A record written before run.json kept absolute paths.
    same_path = args.data in (record["data"], absolute_spec(record["data"]))
    if "data_fingerprint" in record:
        if fingerprint != record["data_fingerprint"]:
            then = "" if same_path else f" ({record['data']})"
            raise CLIError(f"--resume: --data {args.data} holds other training or validation pairs than the run "
                           f"was trained on{then}; give the run's data (moved is fine), or start a new run")
    elif not same_path:  # a run from before fingerprints: nothing to check against
        print(f"note: --resume reads --data {args.data}, not the run's {record['data']}: its valid and test "
              f"pairs stay the run's only if it holds the same lines", file=sys.stderr)


def check_same_vocabulary_and_direction(args: argparse.Namespace, corpus, bundle) -> None:
    """--resume: the checkpoint's tokenizer and languages are the run's; --tokenizer, --src or --tgt
    that name others are refused (the same ones, given again, are fine)."""
    changed = []
    if tokenizer_kind(args) != bundle.tokenizer.kind:
        changed.append(f"--tokenizer {tokenizer_kind(args)} (the run's: {bundle.tokenizer.kind})")
    for flag, now, then in (("--src", corpus.src_lang, bundle.info.get("src_lang")),
                            ("--tgt", corpus.tgt_lang, bundle.info.get("tgt_lang"))):
        if then is not None and now != then:
            changed.append(f"{flag} {now} (the run's: {then})")
    refuse_changes(changed, "the run's checkpoints were trained that way")


def refuse_changes(changed: list[str], why: str) -> None:
    """--resume: refuse options given with other values than the run's, each as "--flag now (the run's: then)"."""
    if changed:
        them = "it" if len(changed) == 1 else "them"
        raise CLIError(f"--resume: {', '.join(changed)}: {why}; leave {them} out to keep the run's, "
                       f"or start a new run")


@contextlib.contextmanager
def damaged_checkpoint_hint(out: Path, latest: Path):
    """--resume always starts from the latest checkpoint: if it cannot be read, say how to start from the one
    before (run_checkpoints only lists step-* folders)."""
    try:
        yield
    except ValueError as exc:
        earlier = run_checkpoints(out)[:-1]
        aside = out / f"damaged-{latest.name}"
        way = (f"to go on from {earlier[-1].name}, move the damaged one aside: mv {latest} {aside}" if earlier
               else "it is the run's only checkpoint: start a new run")
        raise CLIError(f"--resume: {exc}; {way}") from None


def tokenizer_kind(args: argparse.Namespace) -> str:
    return args.tokenizer or ("word" if args.data.startswith("synthetic:") else "bpe")


def trim_metrics(path: Path, step: int) -> None:
    """Resuming from step N: drop metrics.jsonl's records after N (steps of a killed run that will be trained
    again) and any half-written line, so that each step is logged once."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line + "\n")
        except (ValueError, KeyError, TypeError):
            continue
    write_output(path, "".join(kept))


def check_creatable(out: Path) -> None:
    """Refuse a folder that cannot be made (a file on its path, no write access) before any work."""
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"cannot create {out}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise CLIError(f"cannot create {out}: {parent} is not writable")


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


def shared_tokenizer(corpus, args, rank: int, world: int):
    """Rank 0 learns the vocabulary; the other ranks receive it, so all hold the same one."""
    text = refusal = None
    if rank == 0:
        try:
            text = Tokenizer.train((s for pair in corpus.train for s in pair), args.vocab_size,
                                   tokenizer_kind(args)).to_json()
        except ValueError as exc:  # core names its argument; here it is an option
            refusal = re.sub(r"^vocab_size\b", "--vocab-size", str(exc))
    if world > 1:  # the refusal too: the other ranks would wait for the vocabulary for ever
        box = [text, refusal]
        dist.broadcast_object_list(box, src=0)
        text, refusal = box
    if refusal:
        raise CLIError(refusal)
    return Tokenizer.from_json(text)


def command_train(args: argparse.Namespace) -> None:
    check_out_folder(args.out, args.resume)  # first: a mistyped --resume folder is the problem to name
    record = run_record(args.out) if args.resume else {}
    check_data_given(args, record)
    args.data = absolute_spec(args.data)  # run.json's record then reads the same files from any folder
    if args.resume:
        check_same_data(args, record)
    rank, world, device = setup_distributed()
    if not args.resume:  # before the corpus is read and anything built; its vocabulary is at most --vocab-size
        check_fits(ModelConfig.from_preset(args.preset, src_vocab_size=args.vocab_size,
                                           tgt_vocab_size=args.vocab_size, **model_overrides(args)),
                   resolve_device(device or args.device))
    corpus = load_corpus(args.data, args.src, args.tgt, seed=args.seed, limit=args.limit)
    fingerprint = data_fingerprint(corpus)
    if args.resume:
        latest = run_checkpoints(args.out)[-1]
        bundle = resumed_bundle(args, record, corpus, fingerprint, latest)
    else:
        latest, bundle = None, fresh_bundle(args, corpus, rank, world)
    bundle.info.update(name=args.out.name, src_lang=corpus.src_lang, tgt_lang=corpus.tgt_lang,
                       data=corpus.description, examples=corpus.examples())
    log = print if rank == 0 else (lambda *a, **k: None)
    train, valid = encoded_data(args, corpus, bundle, log)
    max_steps = 10_000 if args.max_steps is None else args.max_steps
    if args.epochs is not None:
        per_epoch = len(TokenBatcher(train, args.max_tokens, seed=args.seed))
        max_steps = max(1, round(args.epochs * per_epoch / (args.accum * world)))
    # The config first: its check of a bad option (--label-smoothing 1) comes before any note on the run.
    config = TrainConfig(max_steps=max_steps, max_tokens=args.max_tokens, accum=args.accum, schedule=args.schedule,
                         warmup=args.warmup, lr_factor=args.lr_factor, peak_lr=args.lr,
                         label_smoothing=args.label_smoothing, weight_decay=args.weight_decay,
                         clip_norm=args.clip_norm, amp=args.amp, compile=args.compile,
                         device=device or args.device, seed=args.seed, eval_every=args.eval_every,
                         bleu_sentences=args.bleu_sentences)
    note_unused_rate(args, log)
    trainer = Trainer(bundle, train, config, valid_pairs=corpus.valid, valid=valid)
    if latest:
        restore_trainer(trainer, args, latest, rank)
    note_run(args, corpus, trainer, len(train), world, log)
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        given = {k: str(v) for k, v in vars(args).items() if k != "from_run"}
        record = {"options": run_options(build_parser(), args), **given, "data_fingerprint": fingerprint}
        (args.out / "run.json").write_text(json.dumps(record, indent=2))
    train_loop(trainer, args, rank)


def check_data_given(args: argparse.Namespace, record: dict) -> None:
    if args.data is None:
        kept = ""
        if args.resume:
            kept = (f" ({args.out / 'run.json'} holds none to resume with)" if record
                    else f" (there is no readable {args.out / 'run.json'} to take the run's from)")
        raise CLIError(f"train needs --data{kept} (see --help for its forms)")


def fresh_bundle(args: argparse.Namespace, corpus, rank: int, world: int) -> ModelBundle:
    """A new model and the vocabulary learnt from the corpus (every rank the same)."""
    torch.manual_seed(args.seed)
    tokenizer = shared_tokenizer(corpus, args, rank, world)
    config = ModelConfig.from_preset(args.preset, src_vocab_size=tokenizer.vocab_size,
                                     tgt_vocab_size=tokenizer.vocab_size, **model_overrides(args))
    return ModelBundle(Transformer(config), tokenizer)


def resumed_bundle(args: argparse.Namespace, record: dict, corpus, fingerprint: str, latest: Path) -> ModelBundle:
    """--resume: the run's latest checkpoint, once the data, vocabulary, direction and model config given
    are found to be the run's."""
    with damaged_checkpoint_hint(args.out, latest):
        bundle = load_checkpoint(latest)
    check_same_vocabulary_and_direction(args, corpus, bundle)  # first: a reversed direction swaps the pairs
    check_same_pairs(args, record, fingerprint)
    overrides = model_overrides(args)
    # A run from before --attention-bias existed has biases without the flag in its run.json: the flag
    # can only add them, so without it the run keeps its own.
    overrides.setdefault("attention_bias", bundle.model.config.attention_bias)
    wanted = ModelConfig.from_preset(args.preset, src_vocab_size=bundle.tokenizer.vocab_size,
                                     tgt_vocab_size=bundle.tokenizer.vocab_size, **overrides)
    if wanted != bundle.model.config:
        given = wanted.to_dict()
        diff = ", ".join(f"{MODEL_FLAGS.get(k, k)} {v} (now {given[k]})"
                         for k, v in bundle.model.config.to_dict().items() if given[k] != v)
        raise CLIError(f"--resume: the run in {args.out} has a different model config: it was trained with "
                       f"{diff}; leave those options out to keep the run's")
    return bundle


def encoded_data(args: argparse.Namespace, corpus, bundle: ModelBundle, log) -> tuple[list, list]:
    """The training and validation pairs as token ids, with a note on each thing the run will not see as
    given: pairs left out (an empty side, too long), words the vocabulary lacks, pairs over --max-tokens."""
    max_len = bundle.model.config.max_len
    train, dropped = encode_pairs(corpus.train, bundle.tokenizer, max_len)
    valid, _ = encode_pairs(corpus.valid, bundle.tokenizer, max_len)
    empty = dropped_empty_note(corpus.description)
    if empty:
        log(f"note: {empty}", file=sys.stderr)
    if dropped:
        log(f"note: {dropped} training pairs longer than {max_len} tokens were left out", file=sys.stderr)
    unknown = unknown_share(train)
    if unknown > TOO_MANY_UNKNOWN and not args.resume:  # a resumed run keeps its vocabulary
        advice = ("they are words seen only once in the training data; --tokenizer bpe writes such words in pieces"
                  if unknown_from_rare_words(bundle.tokenizer, args.vocab_size) else "give a larger --vocab-size")
        log(f"note: {unknown:.0%} of the training tokens are <unk>: a vocabulary of {bundle.tokenizer.vocab_size} "
            f"({bundle.tokenizer.kind}) does not cover this data, and the model would learn to write <unk>; "
            f"{advice}", file=sys.stderr)
    oversized = sum(max(len(e.src), len(e.tgt)) > args.max_tokens for e in train)
    if oversized and "max_tokens" not in getattr(args, "from_run", ()):
        log(f"note: {oversized} of {len(train)} training pairs are longer than --max-tokens {args.max_tokens} "
            f"tokens, so each of them is a batch of its own (slow); the budget counts a batch's padded "
            f"tokens, and a few thousand batches many sentences", file=sys.stderr)
    return train, valid


def note_unused_rate(args: argparse.Namespace, log) -> None:
    """--lr with the noam schedule, or --lr-factor with another, changes nothing: say so."""
    unused, instead = (("lr", "--lr-factor scales eq. 3's rate") if args.schedule == "noam"
                       else ("lr_factor", "--lr sets its peak"))
    if (getattr(args, unused) != build_parser().commands["train"].get_default(unused)
            and unused not in getattr(args, "from_run", ())):
        log(f"note: --{unused.replace('_', '-')} has no effect with --schedule {args.schedule} ({instead}); "
            f"it is ignored", file=sys.stderr)


def restore_trainer(trainer, args: argparse.Namespace, latest: Path, rank: int) -> None:
    """--resume: the optimizer, schedule, batcher and step of the run's latest checkpoint."""
    with damaged_checkpoint_hint(args.out, latest):
        state = load_trainer_state(latest)
    if state is None:
        raise CLIError(f"--resume: {latest} holds weights but no trainer state (trainer.pt), so the "
                       f"optimizer and step cannot be restored; was it written by `average`?")
    trainer.load_state_dict(state)
    if trainer.step_count >= trainer.config.max_steps:
        raise CLIError(f"--resume: the run in {args.out} is already at step {trainer.step_count}; give a "
                       f"larger --max-steps (or --epochs) to train on")
    if rank == 0:
        trim_metrics(args.out / "metrics.jsonl", trainer.step_count)


def note_run(args: argparse.Namespace, corpus, trainer, pairs: int, world: int, log) -> None:
    """The run's last notes (a warmup past its end, unnamed languages) and its summary lines."""
    max_steps, bundle = trainer.config.max_steps, trainer.bundle
    # After a resume's refusals; not again on a resume that keeps the run's --warmup and --max-steps.
    if args.warmup > max_steps and not {"warmup", "max_steps"} <= getattr(args, "from_run", set()):
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
        f"{bundle.model.num_parameters() / 1e6:.1f}M parameters, vocabulary {bundle.tokenizer.vocab_size}, "
        f"{pairs} training pairs, device {trainer.device}, amp {amp}, "
        f"{world} process(es); steps {trainer.step_count}->{max_steps}")
    log(f"loss: label-smoothed cross-entropy per target token (section 5.4, eps {trainer.config.label_smoothing}); "
        f"ppl: exp of the unsmoothed one, the reference tokens' perplexity")


LOG_EVERY = 100  # steps between the lines of a training log without a progress bar


def train_loop(trainer, args: argparse.Namespace, rank: int) -> None:
    """Steps with a progress bar; metrics.jsonl, periodic checkpoints, Ctrl-C saves first."""
    board = open_tensorboard(args.out) if args.tensorboard and rank == 0 else None
    # disable=None: a bar on a terminal; a redirected log gets a plain line every LOG_EVERY steps instead
    bar = tqdm(total=trainer.config.max_steps, initial=trainer.step_count, disable=None if rank == 0 else True,
               unit="step", dynamic_ncols=True)
    metrics = open(args.out / "metrics.jsonl", "a") if rank == 0 else None
    logged = trainer.step_count

    def log(event) -> None:
        """The step's line in metrics.jsonl (and TensorBoard)."""
        nonlocal logged
        record = {k: v for k, v in event.to_dict().items() if v is not None}
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()
        logged = event.step
        if board:
            for key in ("loss", "perplexity", "accuracy", "lr", "tokens_per_s", "grad_norm"):
                board.add_scalar(f"train/{key}", record[key], event.step)
            for key, value in (event.validation or {}).items():
                if isinstance(value, (int, float)):
                    board.add_scalar(f"valid/{key}", value, event.step)

    def on_step(event) -> None:
        if rank != 0:
            return
        bar.update(1)
        status = dict(loss=f"{event.loss:.3f}", ppl=f"{event.perplexity:.1f}", lr=f"{event.lr:.2e}",
                      tok_s=f"{event.tokens_per_s:.0f}")
        bar.set_postfix(status)
        if bar.disable and (event.step % LOG_EVERY == 0 or event.step == trainer.config.max_steps):
            print(f"step {event.step}/{trainer.config.max_steps}: "
                  + " ".join(f"{k} {v}" for k, v in status.items()), flush=True)
        log(event)
        if event.validation:
            shown = " ".join(f"{k} {v:.3f}" for k, v in event.validation.items() if isinstance(v, float))
            bar.write(f"step {event.step}: {shown}")
        if event.step % args.save_every == 0 or event.step == trainer.config.max_steps:
            save(trainer, args)

    def on_ctrl_c(signum, frame) -> None:
        # Ignored from here to the exit: a second Ctrl-C would lose the run's work, and one after the save
        # would print a traceback from the interpreter's shutdown.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        trainer.stop()
        if not trainer.stepping:  # between steps the run's state is whole: saved at once
            raise KeyboardInterrupt
        # Inside a step the batcher has moved on and the weights not yet: the step ends first, then
        # run() returns and the run is saved as it stands, so that a resume takes it up exactly.

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        trainer.run(on_step)
        if trainer.stopped:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        bar.close()
        if rank == 0:
            if trainer.last_event is not None and trainer.last_event.step > logged:  # stopped in its evaluation
                log(trainer.last_event)  # the step is kept, logged without the evaluation
            print("\ninterrupted: saving a checkpoint first (further Ctrl-C presses are ignored)", file=sys.stderr)
            path = save(trainer, args)
            # final/ too: one left from an earlier end of this run would otherwise be evaluated as its latest
            final = copy_checkpoint(path, args.out / "final")
            print(f"saved {path} (and {final.name}/); continue with: python {sys.argv[0]} train --out "
                  f"{args.out.resolve()} --resume", file=sys.stderr)
        raise SystemExit(130)
    finally:
        if not trainer.stopped:
            signal.signal(signal.SIGINT, previous)
        bar.close()
        if metrics:
            metrics.close()
    if rank == 0:
        final = copy_checkpoint(run_checkpoints(args.out)[-1], args.out / "final")  # never half of one
        print(f"done: {trainer.step_count} steps; final checkpoint {final} (the last step's: `average` the last "
              f"few, or evaluate a step-N folder, where a validation score was higher earlier)")


def save(trainer, args: argparse.Namespace) -> Path:
    path = trainer.save(args.out / f"{CHECKPOINT_PREFIX}{trainer.step_count:07d}")
    # Renamed out of the way first (one atomic step), then deleted: a Ctrl-C inside the deletion leaves
    # a hidden folder that the next save sweeps away, never a half-deleted step folder.
    for old in run_checkpoints(args.out)[: -args.keep_last]:
        trash = old.with_name(f".{old.name}.pruning")
        if trash.exists():  # an interrupted pruning of this step's checkpoint before a resume trained it again
            shutil.rmtree(trash)
        old.rename(trash)
    for trash in args.out.glob(f".{CHECKPOINT_PREFIX}*.pruning"):
        shutil.rmtree(trash)
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
    if (path / "run.json").is_file() and not (path / "config.json").exists():  # a run folder, not a checkpoint
        inside = [p for p in [path / "final", *run_checkpoints(path)[::-1]] if (p / "config.json").is_file()]
        raise CLIError(f"{path} is a training run's folder, not a checkpoint; its checkpoints, latest first: "
                       f"{', '.join(map(str, inside[:3])) or 'none yet'}")
    return load_checkpoint(path, device)


def note_min_len(options, bundle) -> None:
    """--min-len beyond anything the model can write: every output would run to its limit and be cut."""
    longest = bundle.model.config.max_len - 2  # <bos> and <eos> take two of its positions
    if options.min_len > longest:
        print(f"note: --min-len {options.min_len} is more than {bundle.name} can write ({longest} tokens): every "
              f"output runs to its maximum length and is cut there", file=sys.stderr)


def read_text_lines(path: Path) -> list[str]:
    if path.is_dir():  # read_lines would call a folder "no such file"
        raise CLIError(f"{path} is a folder; give a text file, one sentence per line")
    return read_lines(path)  # a missing file: FileNotFoundError, one line from main()


def checkpoint_inputs(checkpoint: Path) -> dict[str, Path]:
    """The checkpoint's files, for check_output: inputs too (an --output over its tokenizer.json broke it)."""
    return {f"--checkpoint's {name}": checkpoint / name for name in FILES + OPTIONAL_FILES}


def check_output(path: Path | None, inputs: dict[str, Path | None]) -> None:
    """Refuse an --output that cannot be written, or that is one of the inputs, before the work."""
    if path is None:
        return
    if path.is_dir():
        raise CLIError(f"--output {path} is a folder; give a file name")
    for option, source in inputs.items():
        if source is not None and path.exists() and source.exists() and path.samefile(source):
            raise CLIError(f"--output {path} is the {option} file: writing it would destroy the input; "
                           f"choose another file")
    if _written_in_place(path):
        needs_writing = [path]
    else:
        try:
            folder = path.resolve().parent
        except (RuntimeError, OSError) as exc:  # a symlink loop
            raise CLIError(f"--output {path}: its symlinks cannot be followed ({exc})") from None
        if not folder.is_dir():
            raise CLIError(f"--output {path}: the folder {folder} does not exist")
        # write_output creates a temporary file in the folder and renames it over the file.
        needs_writing = [folder, path] if path.exists() else [folder]
    for target in needs_writing:
        if not os.access(target, os.W_OK):
            raise CLIError(f"--output {path} is not writable" + (f" (its folder {target} is not)"
                                                                 if target != path else ""))


def _standard_stream(path: Path):
    """sys.stdout or sys.stderr when path is the file it writes to (/dev/stdout, or the very file standard
    output goes to), else None."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if os.path.samestat(os.stat(path), os.fstat(stream.fileno())):
                return stream
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # no such file, or no descriptor
            continue
    return None


def _written_in_place(path: Path) -> bool:
    """Not a regular file to replace: a FIFO, a terminal, /dev/null, /dev/stdout and the like."""
    return ((path.exists() and not path.is_file()) or str(path.absolute()).startswith(("/dev/", "/proc/"))
            or _standard_stream(path) is not None)


def write_output(path: Path, text: str) -> None:
    """Write a regular file through a temporary file in its folder, so a failure leaves any old file whole; a
    symlink's file is replaced, not the link. Standard output or error (even redirected to a file) gets the
    text through its own stream, after what it printed before; a FIFO or device is written as it is."""
    stream = _standard_stream(path)
    try:
        if stream is not None:
            stream.write(text)
            stream.flush()
            return
        if _written_in_place(path):
            with open(path, "w", encoding="utf-8") as device:
                device.write(text)
            return
    except OSError as exc:  # /dev/full: "No space left on device", said with the file it was writing
        raise OSError(exc.errno, f"cannot write {path} (--output): {exc.strerror}") from None
    target = path.resolve()
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def data_files(spec: str | None) -> list[Path]:
    """The local files a --data files:... spec reads, for check_output."""
    return local_files(spec[len("files:"):]) if spec and spec.startswith("files:") else []


def report_notices(results, where: str) -> None:
    """What was done to each input (truncated, <unk>, empty, output cut), numbered from 1 as editors do."""
    for number, result in enumerate(results, start=1):
        for notice in result.notices:
            print(f"note: {where} {number}: {notice}", file=sys.stderr)


def read_stdin() -> list[str]:
    """stdin's lines as UTF-8, whatever the locale: under LANG=C Python would decode ü as surrogates."""
    if hasattr(sys.stdin, "buffer"):
        return decode_lines(sys.stdin.buffer.read(), "stdin")
    return split_lines(sys.stdin.read())  # a text stream with no bytes beneath (an embedding program's)


def typed_lines():
    """(number, line) for each line of stdin as it is typed, UTF-8 whatever the locale; a line with a bad
    byte is said and skipped, so one slip does not end the session."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream with no bytes beneath (an embedding program's)
        yield from enumerate((line.rstrip("\r\n") for line in sys.stdin), start=1)
        return
    for number, raw in enumerate(iter(stream.readline, b""), start=1):
        try:
            yield number, decode_lines(raw, "", first_line=number)[0]
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)


def data_pairs(args: argparse.Namespace, bundle) -> tuple[list[str], list[str]]:
    """(sources, references) of --data's --split, in the checkpoint's direction (the other is refused)."""
    trained = (bundle.info.get("src_lang"), bundle.info.get("tgt_lang"))
    src, tgt = args.src, args.tgt
    if src is None and tgt is None and not args.data.startswith("synthetic:"):
        src, tgt = trained  # a folder with several languages needs a direction: the checkpoint's
    seed = (bundle.info.get("train") or {}).get("seed", 0)  # a carved test split is the one it trained beside
    try:
        corpus = load_corpus(args.data, src, tgt, seed=seed)
    except ValueError as exc:  # the checkpoint's languages, which the data lacks: said as a direction
        if (src, tgt) != trained or "is not available" not in str(exc):
            raise
        raise CLIError(f"{bundle.name} translates {trained[0]}->{trained[1]}, but {exc}") from None
    if None not in trained and (corpus.src_lang, corpus.tgt_lang) != trained:
        fix = (f"{args.data} runs one way only" if args.data.startswith("synthetic:")
               else f"pass --src {trained[0]} --tgt {trained[1]}")
        raise CLIError(f"{bundle.name} translates {trained[0]}->{trained[1]} but --data gives "
                       f"{corpus.src_lang}->{corpus.tgt_lang}; {fix}")
    pairs = corpus.test if args.split == "test" else corpus.valid
    if args.split in corpus.description.get("carved", {}):
        trained_here = (bundle.info.get("data") or {}).get("source") == corpus.description["source"]
        how = ("as the checkpoint's training did, so none of them was trained on" if trained_here
               else "(the checkpoint was trained on other data)")
        print(f"note: {args.data} has no {args.split} split of its own: its pairs are carved out with seed {seed} "
              f"{how}; to score every line of a held-out file pair, use --source-file and --reference-file",
              file=sys.stderr)
    files = corpus.description.get("files")  # a folder's, by split: say which of its test sets was scored
    if isinstance(files, dict) and files.get(args.split):
        print(f"scoring the {args.split} split: {' → '.join(files[args.split])}", file=sys.stderr)
    return [s for s, _ in pairs], [t for _, t in pairs]


def command_evaluate(args: argparse.Namespace) -> None:
    if args.data and (args.source_file or args.reference_file):
        raise CLIError("give either --data or --source-file with --reference-file, not both")
    if not (args.data or (args.source_file and args.reference_file)):
        raise CLIError("give --data (with --split) or both --source-file and --reference-file")
    check_output(args.output, {"--source-file": args.source_file, "--reference-file": args.reference_file,
                               **{f"--data {p}": p for p in data_files(args.data)}, **checkpoint_inputs(args.checkpoint)})
    options = decode_options(args)
    bundle = load_bundle(args.checkpoint, args.device)
    note_min_len(options, bundle)
    if args.data:
        sources, references = data_pairs(args, bundle)
        where = "sentence"
    else:
        sources, references = read_text_lines(args.source_file), read_text_lines(args.reference_file)
        if len(sources) != len(references):
            raise CLIError(f"{args.source_file} has {len(sources)} lines but {args.reference_file} has "
                           f"{len(references)}")
        where = f"{args.source_file} line"
    if args.limit is not None:
        sources, references = sources[: args.limit], references[: args.limit]
    started = time.perf_counter()
    # a bar only on a terminal, never in a redirected log
    result, translations = evaluate_bundle(bundle, sources, references, options, progress=sys.stderr.isatty())
    elapsed = time.perf_counter() - started
    report_notices(translations, where)
    if args.output:
        write_output(args.output, "".join(t.text + "\n" for t in translations))
    print(f"{bundle.name}: {len(sources)} sentences, {options.method}"
          f"{f' {options.beam_size}' if options.method == 'beam' else ''}, {elapsed:.1f} s")
    print(f"BLEU = {result.bleu:.2f}   {result.bleu_signature}")
    print(f"chrF = {result.chrf:.2f}   {result.chrf_signature}")


def command_translate(args: argparse.Namespace) -> None:
    options = decode_options(args)
    if args.n_best > 1:
        if options.method != "beam" or args.n_best > options.beam_size:
            raise CLIError(f"--n-best {args.n_best} needs --method beam with --beam >= {args.n_best}")
        options.n_best = args.n_best
    if args.sentences and args.input:
        raise CLIError("give the sentences as arguments or --input, not both")
    check_output(args.output, {"--input": args.input, **checkpoint_inputs(args.checkpoint)})
    lines = read_text_lines(args.input) if args.input else args.sentences or None
    if lines is None and sys.stdin is None:  # started with stdin closed (`<&-`)
        raise CLIError("no sentences to translate: give them as arguments, with --input, or on stdin (it is closed)")
    bundle = load_bundle(args.checkpoint, args.device)  # before waiting on stdin: a bad model is said at once
    note_min_len(options, bundle)
    if lines is None and sys.stdin.isatty() and not args.output:
        return translate_as_typed(bundle, options, args.n_best)
    if lines is None:
        lines = read_stdin()
    where = "argument" if args.sentences else f"{args.input or 'stdin'} line"
    if not lines:
        print(f"note: {args.input or 'stdin'} holds no lines; nothing to translate", file=sys.stderr)
    # disable=None: a bar only on a terminal, never in a redirected log
    with tqdm(total=len(lines), desc="translating", unit="sent", disable=None, leave=False) as bar:
        try:
            results = translate_detailed(bundle, lines, options, on_batch=bar.update)
        except ValueError as exc:  # core names a sentence as its list index: "sentences[3]: ..."
            raise CLIError(re.sub(r"^sentences\[(\d+)\]", lambda m: f"{where} {int(m[1]) + 1}", str(exc))) from None
    report_notices(results, where)
    out = [output_line(r, args.n_best) for r in results]
    text = "\n".join(out) + ("\n" if out else "")
    if args.output:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)


def output_line(result, n_best: int) -> str:
    """The translation, or with --n-best N, 2 x N tab-separated cells: text, score, ... (empty cells where
    a line has fewer hypotheses, as an empty source does)."""
    if n_best == 1:
        return result.text
    cells = [f"{text}\t{score:.4f}" for text, score in result.n_best]
    return "\t".join(cells + ["\t"] * (n_best - len(cells)))


def translate_as_typed(bundle, options, n_best: int) -> None:
    """stdin is a terminal: each line is translated as soon as it is typed, until Ctrl-D."""
    language = bundle.info.get("src_lang")
    print(f"{bundle.name}: type {f'{language} ' if language else ''}sentences, one per line (Enter translates); "
          f"Ctrl-D ends (Ctrl-Z Enter on Windows)", file=sys.stderr)
    for number, line in typed_lines():
        result = translate_detailed(bundle, [line], options)[0]
        for notice in result.notices:
            print(f"note: line {number}: {notice}", file=sys.stderr)
        print(output_line(result, n_best), flush=True)


def command_average(args: argparse.Namespace) -> None:
    if not args.run.is_dir():
        raise CLIError(f"--run {args.run} does not exist or is not a folder")
    found = run_checkpoints(args.run)
    if not found:
        raise CLIError(f"{args.run} holds no {CHECKPOINT_PREFIX}* checkpoints")
    if args.out.exists():
        raise CLIError(f"--out {args.out} already exists; choose another folder (averaging never overwrites)")
    check_creatable(args.out)
    if args.last > len(found):
        print(f"note: {args.run} holds {len(found)} checkpoints, fewer than --last {args.last}; averaging all "
              f"{len(found)}", file=sys.stderr)
    chosen = found[-args.last:]
    average = average_checkpoints([load_checkpoint(p) for p in chosen])
    average.info.update(name=args.out.name, averaged_from=[p.name for p in chosen])
    save_checkpoint(args.out, average)
    if len(chosen) == 1:
        print(f"copied the one checkpoint {chosen[0].name} into {args.out} (nothing to average it with)")
    else:
        print(f"averaged {len(chosen)} checkpoints ({chosen[0].name} .. {chosen[-1].name}) into {args.out}")


def in_words(exc: Exception) -> str:
    """An exception's message; an OSError's without Python's "[Errno N]", naming its file where it has one."""
    if not isinstance(exc, OSError) or exc.strerror is None:
        return str(exc)
    return f"{exc.filename}: {exc.strerror}" if exc.filename is not None else exc.strerror


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_arguments(argv)
        commands = {"train": command_train, "evaluate": command_evaluate, "translate": command_translate,
                    "average": command_average}
        try:
            commands[args.command](args)
        except (CLIError, ValueError, OSError, TrainingStopped) as exc:
            print(refusal(option_names(in_words(exc), args.command), args.command), file=sys.stderr)
            return 2
    except KeyboardInterrupt:  # while loading or tokenizing; an interrupted training run saves first
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
