"""`average`: the paper's checkpoint averaging (section 6.1: the last 5 checkpoints of a base model)."""
from __future__ import annotations

import argparse
import sys

from core.checkpoint import average_checkpoints, load_checkpoint, save_checkpoint

from .common import CHECKPOINT_PREFIX, CLIError, check_creatable, run_checkpoints


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
