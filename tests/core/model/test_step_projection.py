"""A decoding step's output projection on a CPU (core/model/step_projection.py) equals the plain one."""
from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import batch, tiny


@pytest.mark.parametrize("rows", [1, 3, 70])  # 3 rows take the few-rows output projection, 1 and 70 not
def test_decoding_step_equals_full_forward_for_any_number_of_rows(rows):
    model = tiny()
    src, tgt = batch([6, 3] * (rows // 2) + [5] * (rows % 2)), batch([4] * rows, seed=4)
    full = model(src, tgt).log_softmax(-1)
    cache = model.start_decoding(src)
    for t in range(tgt.size(1)):
        torch.testing.assert_close(model.decode_step(tgt[:, t], cache), full[:, t], atol=1e-4, rtol=0)
