"""The Model tab (studio/tabs/model_view.py): every parameter counted once, and the schedule the model trained
with drawn."""
from __future__ import annotations

import numpy as np
import pytest

from studio import plots
from studio.server.registry import examples_for
from studio.numbers import model_parts
from studio.tabs import model_view
from tests.helpers.studio import studio_bundle


def test_model_tab_counts_every_parameter_once(registry):
    bundle = studio_bundle()
    assert sum(n for _, n, _ in model_parts.parameter_rows(bundle)) == bundle.model.num_parameters()
    summary, shares, table, lr, schedule, smoothing, masks = model_view.render(registry, "studio-tiny", 4000, 20000,
                                                                               0.1)
    assert sum(shares.data[0].x) == bundle.model.num_parameters()  # every parameter in one bar or another
    assert set(shares.data[0].y) == {"Embeddings", "Encoder self-attention", "Encoder feed-forward", "LayerNorms",
                                     "Decoder masked self-attention", "Decoder cross-attention", "Decoder feed-forward"}
    assert f"**{bundle.model.num_parameters():,} parameters**" in summary
    assert "Total" in table and f"{bundle.model.num_parameters():,}" in table
    peak = max(lr.data[0].y)
    assert peak == pytest.approx(64 ** -0.5 * 4000 ** -0.5, rel=0.01)
    assert max(smoothing.data[0].y) == pytest.approx(0.9 + 0.1 / bundle.model.config.tgt_vocab_size)
    assert smoothing.data[0].texttemplate == "%{y:.2g}"  # each value written: a log axis hides 0.9 vs 0.7
    assert smoothing.layout.yaxis.exponentformat == "power"  # 10^-4, not plotly's SI "100μ"
    # The reference token is a target-language one: the first of the causal mask's translation.
    reference = smoothing.data[0].marker.color.index("#1b6ca8")
    first = model_parts.example_translation(bundle, examples_for(bundle) or ["ein Beispiel ."])
    expected = bundle.tokenizer.tokens(first.ids[:1]) or ["<eos>"]
    assert smoothing.layout.xaxis.ticktext[reference] == plots.label(expected[0])
    assert len(masks.data) == 2
    z, text = np.asarray(masks.data[0].z), np.asarray(masks.data[0].text)  # one column per sentence
    assert z.shape == text.shape and 2 <= z.shape[1] <= 3 < z.shape[0]
    assert ((text == "&lt;pad&gt;") == (z == 0)).all()
    assert model_view.defaults(registry, "studio-tiny") == (4000, 100000, 0.1)  # no record: the paper's
    assert "records no training settings" in schedule
    # A warm-up past the steps shown: the curve goes on to its peak, and says so. ε = 0: one bar at 1, whose
    # log axis ends just above 1.
    _, _, _, lr, _, smoothing, _ = model_view.render(registry, "studio-tiny", 4000, 1600, 0.0)
    assert max(lr.data[0].x) == 6000 and max(lr.data[0].y) == pytest.approx(peak)
    assert "drawn past the steps shown" in lr.layout.annotations[0].text
    assert list(smoothing.layout.yaxis.range) == [-1.2, 0.1] and max(smoothing.data[0].y) == 1
    assert model_view.render(registry, "missing", 4000, 20000, 0.1)[0].startswith("No model")
    # A slider moved redraws its own plot alone, as render() draws it.
    assert model_view.lr_only(registry, "studio-tiny", 4000, 1600).to_dict() == lr.to_dict()
    assert model_view.smoothing_only(registry, "studio-tiny", 0.0).to_dict() == smoothing.to_dict()
    assert "no model" in str(model_view.lr_only(registry, "missing", 4000, 1600).to_dict())


def test_model_tab_draws_the_schedule_the_model_trained_with(registry):
    bundle = studio_bundle()
    d = bundle.model.config.d_model
    record = dict(schedule="noam", warmup=30, lr_factor=3.0, max_steps=640, label_smoothing=0.2)
    registry.add("warm-30", type(bundle)(bundle.model, bundle.tokenizer, {"name": "warm-30", "train": record}))
    assert model_view.defaults(registry, "warm-30") == (30, 700, 0.2)  # the whole run, in steps of 100
    _, _, _, lr, schedule, *_ = model_view.render(registry, "warm-30", 30, 700, 0.2)
    assert max(lr.data[0].y) == pytest.approx(3.0 * d ** -0.5 * 30 ** -0.5, rel=0.01)  # the lr factor counts
    assert "lr = 3 · d_model" in lr.layout.title.text and "warmup_steps = 30" in lr.layout.annotations[0].text
    assert "lr factor 3, warm-up 30 steps, 640 steps" in schedule and len(lr.data) == 1
    assert lr.layout.annotations[0].xanchor == "left"  # the label on the line's right, inside the plot
    _, _, _, lr, *_ = model_view.render(registry, "warm-30", 700, 700, 0.2)  # a warm-up at the right edge
    assert lr.layout.annotations[0].xanchor == "right"  # its label on the left, not off the plot
    _, _, _, lr, *_ = model_view.render(registry, "warm-30", 200, 700, 0.2)  # the slider moved: compared
    assert [t.name for t in lr.data] == ["warmup_steps = 200", "its own: warmup_steps = 30"]
    assert max(lr.data[1].y) == pytest.approx(3.0 * d ** -0.5 * 30 ** -0.5, rel=0.01)
    assert max(lr.data[1].y) > max(lr.data[0].y)  # a longer warm-up peaks lower (eq. 3)
    fairseq = dict(schedule="inverse_sqrt", warmup=100, peak_lr=1e-3, max_steps=800)
    registry.add("fairseq", type(bundle)(bundle.model, bundle.tokenizer, {"name": "fairseq", "train": fairseq}))
    _, _, _, lr, schedule, *_ = model_view.render(registry, "fairseq", 100, 800, 0.1)
    assert max(lr.data[0].y) == pytest.approx(1e-3, rel=0.01) and "inverse square root" in schedule
    bad = {"name": "bad", "train": {"warmup": "soon", "schedule": "magic"}}  # a hand-edited config.json
    registry.add("bad", type(bundle)(bundle.model, bundle.tokenizer, bad))
    assert model_view.defaults(registry, "bad") == (4000, 100000, 0.1)
    assert "records no training settings" in model_view.render(registry, "bad", 4000, 20000, 0.1)[4]
