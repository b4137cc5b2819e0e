"""`score`: each reference's log-probability as a translation of its source, by teacher forcing (core.score;
fairseq's --score-reference), one row per pair as TSV or JSON lines."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys

from tqdm import tqdm

from core.inference.scoring import Score, score

from .common import CLIError, load_bundle
from .decode import check_pair_options, read_pairs, report_notices
from .files import write_output

TSV_COLUMNS = ("line", "logprob", "mean_logprob", "perplexity", "mean_rank", "tokens")


def command_score(args: argparse.Namespace) -> None:
    check_pair_options(args)
    bundle = load_bundle(args.checkpoint, args.device)
    if args.top_k and args.format != "jsonl":
        print("note: --top-k has no effect without --format jsonl; ignored", file=sys.stderr)
    sources, references, where = read_pairs(args, bundle)
    if not sources:
        print("note: no pairs to score", file=sys.stderr)
    # disable=None: a bar only on a terminal, never in a redirected log
    with tqdm(total=len(sources), desc="scoring", unit="pair", disable=None, leave=False) as bar:
        try:
            scores = score(bundle, sources, references, top_k=args.top_k, batch_size=args.batch_size,
                           on_batch=bar.update)
        except ValueError as exc:  # core names a pair by its index: "pair 3 (sources[3], targets[3]): ..."
            raise CLIError(re.sub(r"^pair (\d+) \(sources\[\d+\], targets\[\d+\]\)",
                                  lambda m: f"{where} {int(m[1]) + 1}", str(exc))) from None
    report_notices(scores, where)
    text = (jsonl if args.format == "jsonl" else tsv)(scores)
    if args.output:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)
    print(summary(bundle.name, scores), file=sys.stderr)


def tsv(scores: list[Score]) -> str:
    """A header, then per pair: its line number, log P(Y|X), the mean per token, perplexity, mean rank and
    the number of tokens scored (<eos> included); nan for an empty source."""
    rows = ["\t".join(TSV_COLUMNS)]
    rows += [f"{line}\t{s.sum:.4f}\t{s.mean:.4f}\t{s.perplexity:.4f}\t{s.mean_rank:.2f}\t{len(s.tokens)}"
             for line, s in enumerate(scores, start=1)]
    return "\n".join(rows) + "\n"


def jsonl(scores: list[Score]) -> str:
    """One JSON object per pair: the figures of tsv() and each token with its log-probability and rank
    (and the model's top --top-k alternatives); null where tsv() says nan."""
    return "".join(json.dumps(_record(line, s), ensure_ascii=False) + "\n" for line, s in enumerate(scores, start=1))


def _record(line: int, s: Score) -> dict:
    def number(x: float) -> float | None:  # JSON has no NaN
        return None if math.isnan(x) else x

    record = {"line": line, "logprob": number(s.sum), "mean_logprob": number(s.mean),
              "perplexity": number(s.perplexity), "mean_rank": number(s.mean_rank), "tokens": s.tokens,
              "token_logprobs": s.token_logprobs, "ranks": s.ranks, "notices": s.notices}
    if any(s.alternatives):
        record["alternatives"] = [[[token, p] for token, p in top] for top in s.alternatives]
    return record


def summary(name: str, scores: list[Score]) -> str:
    """The corpus's figures: the mean log-probability per token over every pair's tokens, and its perplexity."""
    tokens = sum(len(s.token_logprobs) for s in scores)
    if not tokens:
        return f"{name}: nothing scored"
    mean = math.fsum(lp for s in scores for lp in s.token_logprobs) / tokens
    pairs = sum(bool(s.tokens) for s in scores)
    return (f"{name}: {pairs} pair{'s' * (pairs != 1)}, {tokens} tokens (<eos> included); "
            f"mean log-prob per token {mean:.4f}, perplexity {math.exp(-mean):.2f}")
