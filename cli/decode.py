"""`evaluate` (sacreBLEU and chrF of a checkpoint's translations, and the references' token accuracy and
perplexity under teacher forcing) and `translate` (arguments, a file, stdin, or lines as they are typed)."""
from __future__ import annotations

import argparse
import re
import sys
import time
import warnings

from tqdm import tqdm

from core.data.directions import both_directions, directions_of, language_tag
from core.data.files import load_corpus
from core.explain.saliency import alignment
from core.inference.prefix import prefixes_for
from core.inference.translation import translate_detailed
from core.training.evaluation import evaluate_bundle, teacher_forced_metrics

from .args import decode_options
from .common import CLIError, load_bundle
from .files import check_output, checkpoint_inputs, data_files, read_stdin, read_text_lines, typed_lines, write_output


def command_evaluate(args: argparse.Namespace) -> None:
    check_pair_options(args)
    options = decode_options(args)
    bundle = load_bundle(args.checkpoint, args.device)
    note_min_len(options, bundle)
    sources, references, where = read_pairs(args, bundle)
    bundle = bundle.toward(wanted_direction(args, bundle)[1]) if two_way(bundle) else bundle
    started = time.perf_counter()
    # a bar only on a terminal, never in a redirected log
    result, translations = evaluate_bundle(bundle, sources, references, options, progress=sys.stderr.isatty(),
                                           all_references=args.all_references)
    elapsed = time.perf_counter() - started
    report_notices(translations, where)
    if args.output:
        write_output(args.output, "".join(t.text + "\n" for t in translations))
    counted = f"{len(translations)} sentences" + (f" ({len(references)} references)" if args.all_references else "")
    print(f"{bundle.name}: {counted}, {options.method}"
          f"{f' {options.beam_size}' if options.method == 'beam' else ''}"
          f"{f', {options.dtype}' if options.dtype != 'fp32' else ''}, {elapsed:.1f} s")
    print(f"BLEU = {result.bleu:.2f}   {result.bleu_signature}")
    print(f"chrF = {result.chrf:.2f}   {result.chrf_signature}")
    forced = teacher_forced_metrics(bundle, sources, references)  # seed 004's metrics: no decoding, the references read
    print(f"token accuracy = {forced.accuracy:.2%}   perplexity = {forced.perplexity:.2f}   (teacher forced on the "
          f"references: {forced.tokens} tokens, <eos> included)")
    if forced.too_long:
        print(f"note: {forced.too_long} pair{'s' * (forced.too_long != 1)} longer than the model's max_len "
              f"{bundle.model.config.max_len} tokens left out of the accuracy and perplexity", file=sys.stderr)


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
    bundle = load_bundle(args.checkpoint, args.device).toward(args.tgt)  # before stdin: a bad model is said at once
    note_min_len(options, bundle)
    check_prefix(args.prefix, bundle)
    if lines is None and sys.stdin.isatty() and not args.output:
        return translate_as_typed(bundle, options, args)
    if lines is None:
        lines = read_stdin()
    where = "argument" if args.sentences else f"{args.input or 'stdin'} line"
    if not lines:
        print(f"note: {args.input or 'stdin'} holds no lines; nothing to translate", file=sys.stderr)
    # disable=None: a bar only on a terminal, never in a redirected log
    with tqdm(total=len(lines), desc="translating", unit="sent", disable=None, leave=False) as bar:
        try:
            results = translate_detailed(bundle, lines, options, prefix=args.prefix, on_batch=bar.update)
        except ValueError as exc:  # core names a sentence as its list index: "sentences[3]: ..."
            raise CLIError(re.sub(r"^sentences\[(\d+)\]", lambda m: f"{where} {int(m[1]) + 1}", str(exc))) from None
    report_notices(results, where)
    out = [output_line(r, args.n_best, bundle, line if args.print_alignment else None)
           for line, r in zip(lines, results)]
    text = "\n".join(out) + ("\n" if out else "")
    if args.output:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)


def check_prefix(prefix: str | None, bundle) -> None:
    """--prefix refused before any sentence is read, as its option."""
    try:
        prefixes_for(bundle.target_tokenizer, prefix, 1, bundle.model.config.max_len - 1)
    except ValueError as exc:
        raise CLIError(re.sub(r"^prefix\b", "--prefix", str(exc))) from None


def check_pair_options(args: argparse.Namespace) -> None:
    """evaluate's and score's pairs: --data, or --source-file with --reference-file; --output none of them."""
    if args.data and (args.source_file or args.reference_file):
        raise CLIError("give either --data or --source-file with --reference-file, not both")
    if not (args.data or (args.source_file and args.reference_file)):
        raise CLIError("give --data (with --split) or both --source-file and --reference-file")
    check_output(args.output, {"--source-file": args.source_file, "--reference-file": args.reference_file,
                               **{f"--data {p}": p for p in data_files(args.data)},
                               **checkpoint_inputs(args.checkpoint)})


def read_pairs(args: argparse.Namespace, bundle) -> tuple[list[str], list[str], str]:
    """(sources, references, what a notice calls one of them), --limit applied."""
    if args.data:
        sources, references = data_pairs(args, bundle)
        where = "sentence"
    else:
        sources, references = read_text_lines(args.source_file), read_text_lines(args.reference_file)
        if len(sources) != len(references):
            raise CLIError(f"{args.source_file} has {len(sources)} lines but {args.reference_file} has "
                           f"{len(references)}")
        where = f"{args.source_file} line"
    # With --all-references (evaluate's; score has none), the first N sources, each with every reference it has.
    if args.limit is not None and getattr(args, "all_references", False):
        kept = set(list(dict.fromkeys(sources))[: args.limit])
        pairs = [(s, r) for s, r in zip(sources, references) if s in kept]
        sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    elif args.limit is not None:
        sources, references = sources[: args.limit], references[: args.limit]
    return sources, references, where


def data_pairs(args: argparse.Namespace, bundle) -> tuple[list[str], list[str]]:
    """(sources, references) of --data's --split, in the checkpoint's direction (the other is refused), or for a
    model serving both directions, in the one --src/--tgt name (default: its first)."""
    if two_way(bundle):
        return both_ways_pairs(args, bundle)
    trained = (bundle.info.get("src_lang"), bundle.info.get("tgt_lang"))
    src, tgt = args.src, args.tgt
    if src is None and tgt is None and not args.data.startswith("synthetic:"):
        src, tgt = trained  # a folder with several languages needs a direction: the checkpoint's
    # A carved test split is the one it trained beside: the run's seed, and the share its validation split took.
    seed = (bundle.info.get("train") or {}).get("seed", 0)
    trained_data = bundle.info.get("data") or {}
    valid_fraction = (trained_data.get("carved") or {}).get("valid_fraction")
    try:
        corpus = load_corpus(args.data, src, tgt, seed=seed, valid_fraction=valid_fraction)
        if valid_fraction is not None and corpus.description["source"] != trained_data.get("source"):
            corpus = load_corpus(args.data, src, tgt, seed=seed)  # other data: carved as by default
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
        trained_here = trained_data.get("source") == corpus.description["source"]
        how = ("as the checkpoint's training did, so none of them was trained on" if trained_here
               else "(the checkpoint was trained on other data)")
        print(f"note: {args.data} has no {args.split} split of its own: its pairs are carved out with seed {seed} "
              f"{how}; to score every line of a held-out file pair, use --source-file and --reference-file",
              file=sys.stderr)
    files = corpus.description.get("files")  # a folder's, by split: say which of its test sets was scored
    if isinstance(files, dict) and files.get(args.split):
        print(f"scoring the {args.split} split: {' → '.join(files[args.split])}", file=sys.stderr)
    return [s for s, _ in pairs], [t for _, t in pairs]


def two_way(bundle) -> bool:
    """Whether bundle's model serves both directions of a pair (core/data/directions.py)."""
    return len(directions_of(getattr(bundle, "info", {}))) > 1


def both_ways_pairs(args: argparse.Namespace, bundle) -> tuple[list[str], list[str]]:
    """--split of --data as a model serving both directions saw it (read in its first direction and carved by
    linked sentences, core/data/directions.py), the pairs of one direction kept: their sources carry its tag."""
    directions, wanted = directions_of(bundle.info), wanted_direction(args, bundle)
    seed = (bundle.info.get("train") or {}).get("seed", 0)
    valid_fraction = ((bundle.info.get("data") or {}).get("carved") or {}).get("valid_fraction")
    corpus = both_directions(load_corpus(args.data, *directions[0], seed=seed, valid_fraction=valid_fraction), seed,
                             valid_fraction)
    tag = language_tag(wanted[1])
    pairs = [(s, t) for s, t in (corpus.test if args.split == "test" else corpus.valid) if s.startswith(tag + " ")]
    print(f"note: {args.data}'s {args.split} split as {bundle.name} was trained beside it (carved with seed {seed} "
          f"by linked sentences), {wanted[0]}->{wanted[1]}: {len(pairs)} pairs", file=sys.stderr)
    return [s for s, _ in pairs], [t for _, t in pairs]


def wanted_direction(args: argparse.Namespace, bundle) -> tuple[str, str]:
    """The direction of a model serving both that --src and --tgt name (default: its first)."""
    directions = directions_of(bundle.info)
    wanted = next((d for d in directions if args.tgt in (None, d[1]) and args.src in (None, d[0])), None)
    if wanted is None:
        raise CLIError(f"{bundle.name} translates {' and '.join('->'.join(d) for d in directions)}; --src {args.src} "
                       f"--tgt {args.tgt} is not one of them")
    return wanted


def report_notices(results, where: str) -> None:
    """What was done to each input (truncated, <unk>, empty, output cut), numbered from 1 as editors do."""
    for number, result in enumerate(results, start=1):
        for notice in result.notices:
            print(f"note: {where} {number}: {notice}", file=sys.stderr)


def note_min_len(options, bundle) -> None:
    """--min-len beyond anything the model can write: every output would run to its limit and be cut."""
    longest = bundle.model.config.max_len - 2  # <bos> and <eos> take two of its positions
    if options.min_len > longest:
        print(f"note: --min-len {options.min_len} is more than {bundle.name} can write ({longest} tokens): every "
              f"output runs to its maximum length and is cut there", file=sys.stderr)


def output_line(result, n_best: int, bundle=None, aligned_source: str | None = None) -> str:
    """The translation, or with --n-best N, 2 x N tab-separated cells: text, score, ... (empty cells where
    a line has fewer hypotheses, as an empty source does); with --print-alignment (aligned_source, the
    line translated), a last cell of the best output's srcidx-tgtidx pairs."""
    if n_best == 1:
        line = result.text
    else:
        cells = [f"{text}\t{score:.4f}" for text, score in result.n_best]
        line = "\t".join(cells + ["\t"] * (n_best - len(cells)))
    return line if aligned_source is None else f"{line}\t{alignment_cell(bundle, aligned_source, result)}"


def alignment_cell(bundle, source: str, result) -> str:
    """fairseq's --print-alignment pairs, "0-0 1-2 ...": each output token's source token (core.alignment)."""
    if not result.source_tokens:  # an empty source: nothing was translated
        return ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the source's notices were reported with its translation
        return " ".join(f"{s}-{t}" for s, t in alignment(bundle, source, result.ids))


def translate_as_typed(bundle, options, args: argparse.Namespace) -> None:
    """stdin is a terminal: each line is translated as soon as it is typed, until Ctrl-D."""
    language = bundle.info.get("src_lang")
    print(f"{bundle.name}: type {f'{language} ' if language else ''}sentences, one per line (Enter translates); "
          f"Ctrl-D ends (Ctrl-Z Enter on Windows)", file=sys.stderr)
    for number, line in typed_lines():
        result = translate_detailed(bundle, [line], options, prefix=args.prefix)[0]
        for notice in result.notices:
            print(f"note: line {number}: {notice}", file=sys.stderr)
        print(output_line(result, args.n_best, bundle, line if args.print_alignment else None), flush=True)
