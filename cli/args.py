"""The command line: every command's options, their help and examples, parsed once; train's options over
a recipe's (--recipe) and the run's own (--resume, cli/run_record.py), which stand as defaults."""
from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path
from typing import Any

import torch

from core import __version__
from core.data.tokenizer import KINDS
from core.inference.options import DTYPES, LENGTH_PENALTIES, METHODS, SAMPLE_TEMPERATURE, SAMPLE_TOP_P, DecodeOptions
from core.model.config import POSITIONAL, PRESETS
from core.training.keep_best import METRICS
from core.training.recipes import RECIPES, Recipe, get_recipe
from core.training.schedule import SCHEDULES
from core.training.train_config import AMP_MODES

from . import __doc__ as USAGE
from .common import (
    DEFAULT_CHECKPOINT,
    NON_NEGATIVE_INT,
    NON_NEGATIVE_NUMBER,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    PROG,
    SEED,
    device_name,
    number,
    refusal,
)
from .run_record import saved_values

# The vocabulary holds the 4 special tokens and at least one more.
VOCAB_SIZE = number(int, "an integer >= 5", lambda v: v >= 5)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default: "off" for a flag, nothing where there is none (None)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if not action.option_strings or action.default is None or action.default is argparse.SUPPRESS:
            return help_text
        if action.default is False:  # `is`: a default of 0 equals False but is a number
            return help_text + " (default: off)"
        return help_text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse, refusing in two lines (what was wrong, where to look) instead of the whole usage."""

    def error(self, message: str):
        self.exit(2, refusal(message, self.prog.removeprefix(PROG)) + "\n")


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
    # The studio's starting point: the plain distribution (1 and 1) reads as nonsense (core.inference.decoding).
    g.add_argument("--temperature", type=POSITIVE_NUMBER, default=SAMPLE_TEMPERATURE,
                   help="sampling only, > 0 (1: the model's own distribution)")
    g.add_argument("--top-k", type=NON_NEGATIVE_INT, default=0, help="sampling only (0: off)")
    g.add_argument("--top-p", type=float, default=SAMPLE_TOP_P, help="sampling only, in (0, 1] (1: off)")
    g.add_argument("--seed", type=SEED, default=None, help="sampling seed (default: a fresh one)")
    g.add_argument("--batch-size", type=POSITIVE_INT, default=None,
                   help="sentences decoded together (default: 1024 for greedy and sampling, 256 for beam "
                        "search, the fastest on a 2-core CPU)")
    g.add_argument("--device", type=device_name, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    g.add_argument("--dtype", choices=DTYPES, default="fp32",
                   help="arithmetic: fp32 exact; int8: the linear layers dynamically quantized (CPU only, ~1.5-2x "
                        "faster); bf16: bfloat16 weights (faster where the CPU has AVX512-BF16/AMX, or on a GPU); "
                        "both give nearly the same translations")
    g.add_argument("--compiled", action="store_true",
                   help="one sentence at a time through a compiled decoder step (torch.compile, needs a C++ "
                        "compiler; 10-30 s to compile each shape, cached on disk): faster for a few sentences "
                        "on a CPU, slower than the batched default for a whole test set")


def decode_options(args: argparse.Namespace):
    options = DecodeOptions(method=args.method, beam_size=args.beam, alpha=args.alpha,
                            length_penalty=args.length_penalty, max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                            min_len=args.min_len, no_repeat_ngram=args.no_repeat_ngram,
                            temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                            batch_size=args.batch_size, dtype=args.dtype,
                            compiled=args.compiled)
    options.validate()
    note_unused_decoding_options(args)
    return options

BEAM_ONLY = ("beam", "alpha", "length_penalty")


SAMPLING_ONLY = ("temperature", "top_k", "top_p", "seed")


def note_unused_decoding_options(args: argparse.Namespace) -> None:
    """A beam option with greedy decoding, a sampling one with beam search: said, not silently ignored."""
    unused = {"beam": SAMPLING_ONLY, "greedy": BEAM_ONLY + SAMPLING_ONLY, "sample": BEAM_ONLY}[args.method]
    parser = command_parser(args.command)
    given = [f"--{dest.replace('_', '-')}" for dest in unused if getattr(args, dest) != parser.get_default(dest)]
    if given:
        print(f"note: {', '.join(given)} {'has' if len(given) == 1 else 'have'} no effect with --method "
              f"{args.method}; ignored", file=sys.stderr)


MODEL_FLAGS = {"d_model": "--d-model", "d_ff": "--d-ff", "n_heads": "--heads", "d_k": "--d-k", "dropout": "--dropout",
               "encoder_layers": "--encoder-layers", "decoder_layers": "--decoder-layers",
               "max_len": "--max-len", "norm_first": "--norm-first", "attention_bias": "--attention-bias",
               "positional": "--positional"}


def option_names(message: str, command: str) -> str:
    """Core's messages name fields (DecodeOptions.beam_size, n_heads); the user typed options (--beam, --heads).
    Only fields the command has an option for are renamed, and a model's fields only in core's check of the
    model `train` builds from its options: a message about a checkpoint starts with its path and names
    that file's fields (ModelConfig.attention_dropout, which no command has an option for)."""
    flags = {action.dest: action.option_strings[0]
             for action in command_parser(command)._actions if action.option_strings}
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
  python train_cli.py translate --beam 8 --n-best 3 < sentences.de
  python train_cli.py translate --prefix "Two young" "Zwei junge Männer spielen Fußball."
  python train_cli.py translate --print-alignment "Ein Hund läuft."      # text<TAB>0-0 1-1 2-2""",
    "score": """examples:
  python train_cli.py score --source-file test.de --reference-file test.en > scores.tsv
  python train_cli.py score --data files:../shared/data/multi30k --split test --format jsonl --top-k 3 \\
      --output scores.jsonl""",
    "export": """examples:
  python train_cli.py export --format ctranslate2 --checkpoint runs/m30k/final m30k-ct2
  python train_cli.py export --format transformers m30k-hf     # AutoModelForSeq2SeqLM.from_pretrained("m30k-hf")""",
    "average": """example:
  python train_cli.py average --run runs/m30k --last 5 --out runs/m30k/averaged""",
}


@functools.cache
def cli_parser() -> argparse.ArgumentParser:
    """The one parser of a process, built on first use: parsing never changes it."""
    return build_parser()


def command_parser(command: str) -> argparse.ArgumentParser:
    """One command's part of cli_parser()."""
    return cli_parser().commands[command]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=USAGE, formatter_class=HelpFormatter)
    cuda = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
    parser.add_argument("--version", action="version",
                        version=f"Transformer Studio {__version__} (torch {torch.__version__}, {cuda})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = sub.choices  # so that a command's unknown option is refused by that command
    for add_command in (add_train, add_evaluate, add_translate, add_score, add_average, add_export):
        add_command(sub)
    return parser


def add_train(sub: argparse._SubParsersAction) -> None:
    """`train`: the data and the run folder, then the model, optimisation and saving options."""
    t = sub.add_parser("train", help="train a model (CPU, GPU, or several GPUs under torchrun)",
                       description="Train a model; Ctrl-C or SIGTERM saves a checkpoint first.",
                       formatter_class=HelpFormatter, epilog=EXAMPLES["train"])
    t.add_argument("--data",
                   help="required (with --resume: the run's): synthetic:TASK (copy, reverse, sort, numbers, "
                        "dates) | files:PATH (folder of {train,val,test}.LANG[.gz], SRC_FILE,TGT_FILE, or a TSV: "
                        "files:PATH.tsv[.gz]:LANG1-LANG2 names its columns' languages) | hf:NAME[:CONFIG] (a copy "
                        "in the local Hugging Face cache is read offline) | hf:PATH (a save_to_disk folder, or a "
                        "folder of parquet, jsonl or csv files)")
    t.add_argument("--also-train-on", metavar="SPEC",
                   help="a second corpus (a --data spec) whose training pairs join --data's, in the same languages; "
                        "validation and test stay --data's, and a pair holding one of their sentences is left out")
    t.add_argument("--src", help="source language code (inferred when the data has exactly two)")
    t.add_argument("--tgt", help="target language code (inferred, like --src)")
    t.add_argument("--valid-fraction", type=number(float, "a number between 0 and 1", lambda v: 0 < v < 1),
                   help="data without a validation split: the share of its pairs held out for validation, e.g. "
                        "0.1 (default: 1%%, at most 1000 pairs; a test split is carved as well, by the default)")
    t.add_argument("--out", required=True, type=Path, help="run folder (refused if it exists, unless --resume)")
    t.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its latest checkpoint, with the run's options (run.json) "
                        "except those given again")
    t.add_argument("--warm-start", type=Path, metavar="CHECKPOINT",
                   help="a new run that goes on from a checkpoint's weights whose trainer state is lost (a shipped "
                        "or averaged model, a run on another machine): its vocabulary and model, the schedule taken "
                        "up at its step, Adam's moments new and the rate ramped up again over 100 steps; the data "
                        "and split must be its own. Not an exact resume: --resume is")
    t.add_argument("--recipe", choices=list(RECIPES), metavar="NAME",
                   help="a named set of options (core/training/recipes.py); options given as well override its values. "
                        + "; ".join(f"{r.name}: {r.description} ({' '.join(recipe_options(r))})"
                                    for r in RECIPES.values()))
    add_model_options(t)
    add_optimisation_options(t)
    add_saving_options(t)


def add_model_options(t: argparse.ArgumentParser) -> None:
    """train's model: a preset, then overrides (section 3's sizes, 3.4's vocabulary, 3.5's positions)."""
    m = t.add_argument_group("model (a preset, then overrides)")
    m.add_argument("--preset", default="small", choices=list(PRESETS), help="model size (core/model/config.py)")
    m.add_argument("--d-model", type=POSITIVE_INT, help="model width (default: the preset's)")
    m.add_argument("--d-ff", type=POSITIVE_INT, help="feed-forward width (default: the preset's)")
    m.add_argument("--heads", type=POSITIVE_INT, help="attention heads (default: the preset's)")
    m.add_argument("--d-k", type=POSITIVE_INT,
                   help="size of each head's queries and keys, section 3.2.2 (Table 3, row B: values keep "
                        "d_model / heads; default: d_model / heads)")
    m.add_argument("--layers", type=POSITIVE_INT, help="encoder and decoder layers (default: the preset's)")
    m.add_argument("--encoder-layers", type=POSITIVE_INT, help="encoder layers (default: --layers)")
    m.add_argument("--decoder-layers", type=POSITIVE_INT, help="decoder layers (default: --layers)")
    m.add_argument("--dropout", type=float, help="residual dropout (default: the preset's)")
    m.add_argument("--norm-first", action="store_true", help="pre-norm instead of the paper's post-norm")
    m.add_argument("--attention-bias", action="store_true",
                   help="a bias on each attention projection, as fairseq has "
                        "(the paper's W^Q, W^K, W^V, W^O have none)")
    # <bos> and <eos> take two positions.
    m.add_argument("--max-len", type=number(int, "an integer >= 2", lambda v: v >= 2), default=256,
                   help="longest sequence in tokens")
    m.add_argument("--positional", choices=POSITIONAL, default="sinusoidal",
                   help="section 3.5's sinusoids, or learned position embeddings (Table 3, row E: a trained table "
                        "of --max-len rows, so no sequence may be longer)")
    m.add_argument("--vocab-size", type=VOCAB_SIZE, default=8000, help="shared subword vocabulary size")
    m.add_argument("--separate-vocab", action="store_true",
                   help="a vocabulary per language, the target's tied to the output layer only (section 3.4 shares "
                        "one between the languages and ties all three matrices)")
    m.add_argument("--src-vocab-size", type=VOCAB_SIZE,
                   help="with --separate-vocab: the source vocabulary's size (default: --vocab-size)")
    m.add_argument("--tgt-vocab-size", type=VOCAB_SIZE,
                   help="with --separate-vocab: the target vocabulary's size (default: --vocab-size)")
    m.add_argument("--both-directions", action="store_true",
                   help="one model translating both ways (Johnson et al., 2017): each source starts with a tag "
                        "naming its target language, <2es> or <2en>; held-out splits are carved so that no sentence "
                        "nor any translation of it is on two sides")
    m.add_argument("--tokenizer", choices=KINDS, default=None,
                   help="how text becomes tokens: bpe or unigram subwords (--vocab-size of them), or whole words "
                        "(default: word for synthetic tasks, bpe otherwise)")


def add_optimisation_options(t: argparse.ArgumentParser) -> None:
    """train's section 5: batches, steps, the schedule, regularisation, hardware."""
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
                   help="noam: eq. 3; inverse_sqrt: fairseq's, peaking at --lr; constant: --lr after a linear "
                        "warm-up of --warmup steps (--warmup 1: a fixed rate from the first step, as in small "
                        "tutorials)")
    o.add_argument("--warmup", type=POSITIVE_INT, default=4000, help="warm-up steps")
    o.add_argument("--lr-factor", type=POSITIVE_NUMBER, default=1.0, help="scales eq. 3's learning rate (noam)")
    o.add_argument("--lr", type=POSITIVE_NUMBER, default=5e-4,
                   help="peak learning rate (inverse_sqrt), the rate (constant)")
    o.add_argument("--label-smoothing", type=float, default=0.1, help="section 5.4, in [0, 1)")
    o.add_argument("--clip-norm", type=NON_NEGATIVE_NUMBER, default=0.0, help="gradient norm clipping (0: off)")
    o.add_argument("--weight-decay", type=NON_NEGATIVE_NUMBER, default=0.0,
                   help="weight decay, decoupled from Adam's update (AdamW, as fairseq's Adam; the paper uses none)")
    o.add_argument("--amp", choices=AMP_MODES, default="auto",
                   help="auto: bf16 on CUDA (fp16 on a GPU without bf16) and on CPUs with native bf16, else fp32")
    o.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="torch.compile the training step, for long GPU runs: its first steps compile for a minute "
                        "or two (docs/benchmarks.md: what it gave on an H100); --no-compile: off, e.g. resuming "
                        "such a run")
    o.add_argument("--bucket", type=NON_NEGATIVE_INT, default=0,
                   help="pad batch lengths to multiples of this, rows to --max-tokens / length, and train on the whole "
                        "padded grid: a few fixed shapes and no host sync in the forward pass (0: off: the real tokens "
                        "alone, packed)")
    o.add_argument("--cuda-graphs", action="store_true",
                   help="with --compile and --bucket: replay each shape's compiled step as a CUDA graph")
    o.add_argument("--readback-every", type=POSITIVE_INT, default=1,
                   help="steps between reading loss and accuracy back from the GPU (each read waits for it); the "
                        "progress bar and metrics.jsonl then show the means over those steps")
    o.add_argument("--device", type=device_name, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")
    o.add_argument("--seed", type=SEED, default=0, help="initialisation, batch order and data split")
    o.add_argument("--limit", type=POSITIVE_INT, default=None,
                   help="use at most this many training pairs, a seeded sample (default: all)")


def add_saving_options(t: argparse.ArgumentParser) -> None:
    """train's validations and checkpoints."""
    r = t.add_argument_group("evaluation and saving")
    r.add_argument("--eval-every", type=NON_NEGATIVE_INT, default=1000, help="steps between validations (0: never)")
    r.add_argument("--bleu-sentences", type=NON_NEGATIVE_INT, default=200,
                   help="validation sentences decoded for BLEU (0: no BLEU)")
    r.add_argument("--save-every", type=POSITIVE_INT, default=1000, help="steps between checkpoints")
    r.add_argument("--keep-last", type=POSITIVE_INT, default=5, help="checkpoints kept (the paper averages the last 5)")
    r.add_argument("--keep-best", nargs="?", const="bleu", choices=list(METRICS), metavar="METRIC",
                   help="also keep the checkpoint of the best validation METRIC in best/: bleu (the default; needs "
                        "--bleu-sentences), loss, or exact_match (synthetic tasks)")
    r.add_argument("--patience", type=POSITIVE_INT,
                   help="with --keep-best: stop after this many evaluations without a better one (default: never)")
    r.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=False,
                   help="also log to TensorBoard (if installed)")


def add_evaluate(sub: argparse._SubParsersAction) -> None:
    """`evaluate`: BLEU and chrF of a checkpoint on a corpus or two files."""
    e = sub.add_parser("evaluate", help="BLEU and chrF (sacreBLEU) of a checkpoint",
                       description="BLEU and chrF (sacreBLEU, detokenized) of a checkpoint's translations.",
                       formatter_class=HelpFormatter, epilog=EXAMPLES["evaluate"])
    e.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="checkpoint folder (default: checkpoints/tatoeba-de-en, German<->English)")
    e.add_argument("--data", help="a corpus spec as for train (with --split)")
    e.add_argument("--split", choices=("valid", "test"), default="test",
                   help="which part of --data (a corpus without splits: the 1%% carved out as in training)")
    e.add_argument("--src", help="source language code (default: the checkpoint's)")
    e.add_argument("--tgt", help="target language code (default: the checkpoint's)")
    e.add_argument("--source-file", type=Path, help="instead of --data: sources, one per line")
    e.add_argument("--reference-file", type=Path, help="references, one per line")
    e.add_argument("--limit", type=POSITIVE_INT,
                   help="score only the first N sentences (default: all; with --all-references, the first N "
                        "distinct sources, each with all its references)")
    e.add_argument("--output", type=Path, help="write the hypotheses here, one per line (default: not written)")
    e.add_argument("--all-references", action="store_true",
                   help="a source given more than once (Tatoeba lists several translations of one sentence) is "
                        "translated once and scored against all its references; --output then has a line per "
                        "distinct source, and notices number the distinct sources")
    add_decoding_options(e)


def add_translate(sub: argparse._SubParsersAction) -> None:
    """`translate`: sentences from arguments, a file or stdin."""
    tr = sub.add_parser("translate", help="translate sentences: arguments, --input or stdin, one per line",
                        description="Translate the sentences given as arguments, or --input's or stdin's lines\n"
                                    "(typed at a terminal: each as soon as Enter is pressed).",
                        formatter_class=HelpFormatter, epilog=EXAMPLES["translate"])
    tr.add_argument("sentences", nargs="*",
                    help="sentences to translate, each in quotes (default: --input, else stdin)")
    tr.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="checkpoint folder (default: checkpoints/tatoeba-de-en, German<->English)")
    tr.add_argument("--input", type=Path, help="input file, one sentence per line (default: stdin)")
    tr.add_argument("--tgt", help="for a model serving both directions (tatoeba-en-es): the language to translate "
                                  "into (default: its first direction's)")
    tr.add_argument("--output", type=Path, help="output file (default: stdout)")
    tr.add_argument("--n-best", type=POSITIVE_INT, default=1,
                    help="print this many hypotheses per line, tab-separated with their scores (2 x N columns)")
    tr.add_argument("--prefix", help="begin every output with this text, whole words: its tokens are forced, then "
                                     "--method goes on (default: none)")
    tr.add_argument("--print-alignment", action="store_true",
                    help="append a tab column of the best output's alignment as fairseq prints it, srcidx-tgtidx pairs "
                         "(0-based token indices, <eos> aside): each output token's source token with the most "
                         "cross-attention, averaged over the last decoder layer's heads")
    add_decoding_options(tr)


def add_score(sub: argparse._SubParsersAction) -> None:
    """`score`: given translations' log-probabilities by teacher forcing."""
    sc = sub.add_parser("score", help="score given translations: each one's log-probability (teacher forcing)",
                        description="Score each reference as a translation of its source by teacher forcing "
                                    "(fairseq's\n"
                                    "--score-reference): per pair, log P(reference | source), the mean log-prob per\n"
                                    "token (<eos> included), perplexity = exp(-mean) and the mean rank of its tokens\n"
                                    "among the model's choices (1: the model's own top choice).",
                        formatter_class=HelpFormatter, epilog=EXAMPLES["score"])
    sc.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="checkpoint folder (default: checkpoints/tatoeba-de-en, German<->English)")
    sc.add_argument("--data", help="a corpus spec as for train (with --split)")
    sc.add_argument("--split", choices=("valid", "test"), default="test",
                    help="which part of --data (a corpus without splits: the 1%% carved out as in training)")
    sc.add_argument("--src", help="source language code (default: the checkpoint's)")
    sc.add_argument("--tgt", help="target language code (default: the checkpoint's)")
    sc.add_argument("--source-file", type=Path, help="instead of --data: sources, one per line")
    sc.add_argument("--reference-file", type=Path, help="the translations to score, one per line")
    sc.add_argument("--limit", type=POSITIVE_INT, help="score only the first N pairs (default: all)")
    sc.add_argument("--format", choices=("tsv", "jsonl"), default="tsv",
                    help="tsv: a header, then line, logprob, mean_logprob, perplexity, mean_rank, tokens per pair; "
                         "jsonl: those and each token's log-prob and rank")
    sc.add_argument("--top-k", type=NON_NEGATIVE_INT, default=0,
                    help="jsonl: also the model's top K tokens and probabilities at each position")
    sc.add_argument("--output", type=Path, help="write the scores here (default: stdout)")
    sc.add_argument("--batch-size", type=POSITIVE_INT, default=64, help="pairs scored together")
    sc.add_argument("--device", type=device_name, default="auto", help="auto (CUDA if present), cpu, cuda, cuda:1, ...")


def add_average(sub: argparse._SubParsersAction) -> None:
    """`average`: a run's last checkpoints averaged into one."""
    a = sub.add_parser("average", help="average the last N checkpoints of a run into one",
                       description="Average the weights of a run's last N checkpoints (the paper averages 5).",
                       formatter_class=HelpFormatter, epilog=EXAMPLES["average"])
    a.add_argument("--run", type=Path, required=True, help="run folder written by `train`")
    a.add_argument("--last", type=POSITIVE_INT, default=5, help="how many of the latest checkpoints")
    a.add_argument("--out", type=Path, required=True, help="checkpoint folder to write (refused if it exists)")


def add_export(sub: argparse._SubParsersAction) -> None:
    """`export`: a checkpoint for CTranslate2 or Hugging Face transformers."""
    x = sub.add_parser("export", help="write a checkpoint for CTranslate2 or Hugging Face transformers",
                       description=EXPORT_HELP, formatter_class=HelpFormatter, epilog=EXAMPLES["export"])
    x.add_argument("out", type=Path, help="folder to write (refused if it exists)")
    x.add_argument("--format", choices=("ctranslate2", "transformers"), required=True, help="the engine")
    x.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="checkpoint folder (default: checkpoints/tatoeba-de-en, German<->English)")
    x.add_argument("--check-input", type=Path,
                   help="sentences, one per line, that the export must translate as ours (the first 4; default: "
                        "the checkpoint's examples, else words of its vocabulary)")


RECIPE_DESTS = {"peak_lr": "lr", "src_lang": "src", "tgt_lang": "tgt"}  # where train's option and the field differ


def recipe_values(recipe: Recipe) -> dict[str, Any]:
    """The train options a recipe stands for, by dest."""
    values = {"data": recipe.data, **({"also_train_on": recipe.also_train_on} if recipe.also_train_on else {}),
              "src_lang": recipe.src_lang, "tgt_lang": recipe.tgt_lang, "preset": recipe.preset,
              "vocab_size": recipe.vocab_size, **recipe.model, **recipe.train}
    if recipe.both_directions:
        values["both_directions"] = True
    return {RECIPE_DESTS.get(name, name): value for name, value in values.items()}


def recipe_options(recipe: Recipe) -> list[str]:
    """The train options a recipe stands for, as they would be typed."""
    options = []
    for dest, value in recipe_values(recipe).items():
        flag = f"--{dest.replace('_', '-')}"
        options += [flag] if value is True else [flag, str(value)]
    return options


EXPORT_HELP = """Write a checkpoint for another inference engine, in a temporary folder renamed into place only once
the written model translates a few sentences exactly as ours does (beam 4; for transformers, greedy too).

  ctranslate2   a CTranslate2 model (model.bin and the vocabularies); run it with ctranslate2.Translator on the
                tokens of our tokenizer (tokenizer.json of the checkpoint). CTranslate2's only length penalty is
                log P / |Y|^alpha, ours "plain"; it takes one maximum output length per call. It cannot carry a
                key size d_k other than d_model / n_heads; learned positions, pre-norm and separate
                vocabularies go across.
  transformers  a MarianMTModel folder with its tokenizer (AutoModelForSeq2SeqLM, AutoTokenizer; transformers
                4's pipeline("translation", OUT)), ready for the Hub. Marian cannot carry learned positions (it
                computes sinusoids on load), pre-norm (norm_first), separate source and target vocabularies (one
                tokenizer) or d_k other than d_model / n_heads. Its beam search's length_penalty is ours "plain" too."""


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command's options; train's also over those of --recipe and of the run it resumes (train_arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = cli_parser().parse_known_args(argv)
    if unknown:  # argparse would answer with the top-level usage, which does not list the command's options
        command_parser(args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    return train_arguments(args, argv) if args.command == "train" else args


LENGTH = ("max_steps", "epochs")  # a run's length, of either kind


def train_arguments(given: argparse.Namespace, argv: list[str]) -> argparse.Namespace:
    """train's options: those given (argv, parsed as given) over the run's own (--resume: run.json's), over the
    recipe's (--recipe), over the parser's defaults. Sets from_run: the options that came from the run, not
    given again (their notes were given when the run began)."""
    train = command_parser("train")
    run = saved_values(train, given.out) if given.resume else {}
    defaults = {**(recipe_values(get_recipe(given.recipe)) if given.recipe else {}), **run}
    if given.max_steps is not None or given.epochs is not None:  # a new length replaces the old, of either kind
        defaults = {dest: value for dest, value in defaults.items() if dest not in LENGTH}
    if not defaults:
        given.from_run = frozenset()
        return given
    # Values already in the namespace stand as defaults: argparse sets only what argv gives. argv[0] is "train":
    # the top-level parser's own options, --help and --version, exit.
    args = train.parse_args(argv[1:], namespace=argparse.Namespace(command="train", **defaults))
    args.from_run = frozenset(dest for dest in run if getattr(args, dest) != getattr(given, dest))
    return args
