"""Training on more than one corpus (section 5.1 trains on one; a general model wants several): the first
corpus keeps its validation and test splits, and another corpus gives its training pairs only.

The general German<->English model learns everyday sentences from Tatoeba and image captions from Multi30k's
training split, and is validated and tested on Tatoeba's carved splits (Multi30k's own test set stays unseen,
for the model card). A training pair that holds a sentence of the first corpus's held-out splits is left out
and counted, so that no held-out sentence is learnt from the other corpus.
"""
from __future__ import annotations

from .corpus import Pair, ParallelCorpus
from .directions import both_ways, untagged


def held_out_sentences(corpus: ParallelCorpus) -> set[str]:
    """Every sentence of corpus's valid and test splits, either side, without its language tag."""
    return {untagged(text) for pair in corpus.valid + corpus.test for text in pair}


def with_training_pairs(corpus: ParallelCorpus, extra: ParallelCorpus, *, both_directions: bool) -> ParallelCorpus:
    """corpus with extra's training pairs added to its own (extra in corpus's direction; both_directions: each of
    them both ways, tagged as core.data.directions tags them). extra's held-out splits are not used."""
    if (extra.src_lang, extra.tgt_lang) != (corpus.src_lang, corpus.tgt_lang):
        raise ValueError(f"{extra.description.get('source', 'the added corpus')} reads {extra.src_lang}→"
                         f"{extra.tgt_lang}, not {corpus.src_lang}→{corpus.tgt_lang} as the first corpus does")
    held = held_out_sentences(corpus)
    kept: list[Pair] = [pair for pair in extra.train if not (pair[0] in held or pair[1] in held)]
    added = both_ways(kept, corpus.src_lang, corpus.tgt_lang) if both_directions else kept
    description = dict(corpus.description)
    description["added_training"] = [*description.get("added_training", []), {
        "source": extra.description.get("source", ""), "pairs": len(kept),
        "left_out_as_held_out": len(extra.train) - len(kept)}]
    description["counts"] = {**description["counts"], "train": len(corpus.train) + len(added)}
    return ParallelCorpus(corpus.train + added, corpus.valid, corpus.test, corpus.src_lang, corpus.tgt_lang,
                          description)
