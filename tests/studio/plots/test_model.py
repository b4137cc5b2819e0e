"""The Positional encoding and Model tabs' figures (studio/plots/model.py): the sinusoids' legend fits a phone."""
from __future__ import annotations

import numpy as np

from studio import plots


def test_the_sinusoids_legend_names_fit_two_a_row_on_a_phone():
    table = np.zeros((10, 128))
    fig = plots.pe_curves(table, [0, 1, 64], (np.arange(10.0), table))
    named = [t.name for t in fig.data if t.showlegend is not False]
    assert named == ["dim 0 (sin)", "dim 1 (cos)", "dim 64 (sin)"]
    phone = fig.layout.meta["narrow"]
    assert [phone[f"data[{i}].name"] for i in (0, 2, 4)] == ["dim 0 sin", "dim 1 cos", "dim 64 sin"]
    assert phone["legend.entrywidth"] < 0.5  # 0.5 and a gap left one entry a row
