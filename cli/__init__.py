"""Transformer Studio from the command line: train, evaluate, translate, score, average, export.

    python train_cli.py train --preset small --data files:../shared/data/multi30k --src de --tgt en --out runs/m30k
    python train_cli.py evaluate --checkpoint runs/m30k/final --data files:../shared/data/multi30k --split test
    echo "Ein Hund läuft." | python train_cli.py translate
    python train_cli.py score --source-file test.de --reference-file test.en > scores.tsv
    python train_cli.py average --run runs/m30k --last 5 --out runs/m30k/averaged
    python train_cli.py export --format ctranslate2 m30k-ct2     # or --format transformers
    torchrun --nproc_per_node=4 train_cli.py train ...      # DistributedDataParallel

Run `python train_cli.py COMMAND --help` for every option.
"""
