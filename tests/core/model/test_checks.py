"""What the model refuses by name before torch would fail deep inside (core/model/checks.py)."""
from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import V, batch, tiny


def test_padding_inside_a_target_is_refused():
    model = tiny()
    tgt = batch([5])
    tgt[0, 2] = 0  # pad between real tokens
    with pytest.raises(ValueError, match="right-padded"):
        model(batch([4]), tgt)


def test_a_left_padded_source_is_refused():
    """Positions count from the first column (3.5): left padding would shift a sentence's positions."""
    model = tiny()
    src = batch([4, 2])
    src[1] = torch.cat([src[1, 2:], src[1, :2]])  # the short row's padding moved to its front
    with pytest.raises(ValueError, match="source must be right-padded"):
        model.encode(src)


def test_a_source_row_of_only_padding_is_refused():
    """Every key of such a row is masked: eq. 1 spelled out gives NaN, the fused kernel does not."""
    model = tiny()
    src = batch([4, 3])
    src[1] = 0
    for need_weights in (False, True):
        with pytest.raises(ValueError, match="all padding"):
            model(src, batch([5, 5]), return_attention=need_weights)


def test_too_long_sequence_raises_clear_error():
    model = tiny()
    with pytest.raises(ValueError, match="max_len"):
        model(batch([65]), batch([3]))
    with pytest.raises(ValueError, match="max_len"):
        model(batch([3]), batch([70]))


@pytest.mark.parametrize("src, tgt_in, message", [
    (batch([3]), torch.tensor([[5, V]]), r"tgt_in holds token ids outside the vocabulary 0..39"),
    (torch.tensor([[5, -1]]), batch([3]), r"source holds token ids outside the vocabulary"),
    (batch([3]), batch([3]).float(), r"tgt_in must hold integer token ids"),
    (batch([3]), batch([3])[0], r"tgt_in must be a \(batch, length\) tensor"),
    (batch([3]), batch([3])[:, :0], r"with at least one token, got shape \(1, 0\)"),
    (batch([3]), batch([3, 3]), r"src and tgt_in must hold the same number of sentences, got 1 and 2"),
])
def test_bad_token_tensors_are_refused_by_name(src, tgt_in, message):
    # They failed inside torch ("index out of range in self", a reshape) or, for a batch-size
    # mismatch, were read as beam hypotheses sharing one source.
    with pytest.raises(ValueError, match=message):
        tiny()(src, tgt_in)
