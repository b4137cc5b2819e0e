"""Section 3.5: the sinusoidal encodings follow the paper's formula (core/model/positional.py)."""
from __future__ import annotations

import math

import pytest

from core import sinusoidal_encoding


@pytest.mark.parametrize("pos,i", [(0, 0), (1, 0), (7, 3), (50, 31), (123, 10)])
def test_positional_encoding_matches_formula(pos, i):
    d_model = 64
    pe = sinusoidal_encoding(128, d_model)
    angle = pos / 10000 ** (2 * i / d_model)
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_encoding_needs_an_even_width():
    with pytest.raises(ValueError, match="d_model must be even.*got 7"):
        sinusoidal_encoding(10, 7)
