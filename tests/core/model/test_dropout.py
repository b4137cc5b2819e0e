"""core.model.dropout.Dropout: nn.Dropout's function with a cheaper CPU mask."""
from __future__ import annotations

import pytest
import torch

from core.model.dropout import Dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drops_each_element_with_probability_p(p):
    torch.manual_seed(0)
    n = 1_000_001  # the last 64-bit draw is only partly used
    dropped = (~keep_mask(torch.Size([n]), p)).double().mean().item()
    assert abs(dropped - p) < 5 * (p * (1 - p) / n) ** 0.5  # five standard deviations


def test_mask_bits_are_not_biased_by_position():
    # Four elements share each 64-bit draw: each quarter must be a fair coin on its own,
    # independent of the others.
    torch.manual_seed(1)
    mask = keep_mask(torch.Size([400_000, 4]), 0.5)
    for quarter in mask.T:
        assert abs(quarter.double().mean().item() - 0.5) < 5 * (0.25 / 400_000) ** 0.5
    for a in range(4):
        for b in range(a + 1, 4):
            assert abs((mask[:, a] == mask[:, b]).double().mean().item() - 0.5) < 0.004


def test_survivors_are_scaled_and_the_gradient_is_the_same_mask():
    torch.manual_seed(2)
    x = torch.randn(37, 53, requires_grad=True)
    y = Dropout(0.25).train()(x)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)


def test_seeded_masks_repeat_and_differ_between_seeds():
    drop, x = Dropout(0.1).train(), torch.ones(64, 64)
    torch.manual_seed(3)
    first = drop(x)
    torch.manual_seed(3)
    assert torch.equal(drop(x), first)
    assert not torch.equal(drop(x), first)


def test_identity_in_eval_mode_and_at_p_zero():
    x = torch.randn(8, 8)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_bf16_keeps_its_dtype_and_scales_in_full_precision():
    torch.manual_seed(4)
    x = torch.full((1000,), 0.9, dtype=torch.bfloat16)
    y = Dropout(0.1).train()(x)
    assert y.dtype == torch.bfloat16
    assert set(y.float().unique().tolist()) == {0.0, 1.0}  # 0.9 / 0.9, not 0.9 * bf16(1/0.9)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_probability_outside_zero_one_is_refused(p):
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\)"):
        Dropout(p)
