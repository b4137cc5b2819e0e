"""core.inference.ranking: the blocked top-k and argmax return exactly what torch.topk and torch.argmax
return, whatever the vocabulary size, ties, -inf and NaN."""
from __future__ import annotations

import pytest
import torch

from core.inference.ranking import argmax, top_k

# Whole blocks, a partial last block, only a few blocks, fewer blocks than k.
VOCABS = [8000, 1037, 130, 20]


def scores(vocab: int, rows: int = 50) -> torch.Tensor:
    x = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(vocab))
    x[3] = float("-inf")  # every token forbidden
    x[4, 5:] = float("-inf")  # fewer allowed tokens than k
    return x


@pytest.mark.parametrize("vocab", VOCABS)
def test_top_k_equals_torch_topk(vocab):
    x = scores(vocab)
    got_values, got_indices = top_k(x, 8)
    want_values, want_indices = x.topk(8, dim=1)
    torch.testing.assert_close(got_values, want_values, atol=0, rtol=0)
    finite = want_values.isfinite()  # equal (-inf) values may come in another order
    assert torch.equal(got_indices[finite], want_indices[finite])
    assert torch.equal(x.gather(1, got_indices), got_values)


@pytest.mark.parametrize("vocab", VOCABS)
def test_argmax_equals_torch_argmax(vocab):
    x = scores(vocab)
    x[5, :] = 0.25  # a whole row tied: the first column wins
    x[6, [vocab // 3, vocab // 2, vocab - 1]] = 50.0  # ties in different blocks
    x[7, -1] = 60.0  # the maximum in the last (possibly partial) block
    assert torch.equal(argmax(x), x.argmax(dim=1))
    x[8, vocab // 2] = float("nan")  # torch ranks NaN highest
    assert torch.equal(argmax(x), x.argmax(dim=1))
    few_values = torch.randint(0, 3, (50, vocab), generator=torch.Generator().manual_seed(1)).float()
    assert torch.equal(argmax(few_values), few_values.argmax(dim=1))
