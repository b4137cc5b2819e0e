"""Transformer Studio from the command line: train, evaluate, translate, average.

    python train_cli.py train --preset small --data files:../shared/data/multi30k --src de --tgt en --out runs/m30k
    python train_cli.py evaluate --checkpoint runs/m30k/final --data files:../shared/data/multi30k --split test
    echo "Ein Hund läuft." | python train_cli.py translate
    python train_cli.py average --run runs/m30k --last 5 --out runs/m30k/averaged
    torchrun --nproc_per_node=4 train_cli.py train ...      # DistributedDataParallel

The commands live in the cli/ package; run `python train_cli.py COMMAND --help` for every option.
"""
import sys

import cli.loop
from cli.main import main

if __name__ == "__main__":
    cli.loop.IGNORE_STOPS_TO_EXIT = True
    sys.exit(main())
