"""A run set up (studio/train/setup.py): the parameter estimate is the model's, a model too large for memory or
above a billion parameters is refused before it is built, a large one on a CPU starts with a notice, and so
does a vocabulary that leaves the data unknown."""
from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pytest
import torch

import core.bundle as bundle_module
from core.bundle import check_fits, parameter_count
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio.train import live, tab
from studio.train import setup as run_setup
from tests.helpers.jobs import QUICK, panel, wait_for


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True}, {"shared_vocab": False, "tgt_vocab_size": 77}])
def test_parameter_estimate_matches_the_model(overrides):
    config = ModelConfig.from_preset("tiny", **{"src_vocab_size": 50, "tgt_vocab_size": 50, **overrides},
                                     encoder_layers=1, decoder_layers=3, d_ff=96)
    assert parameter_count(config) == Transformer(config).num_parameters()


def test_a_model_too_large_for_memory_is_refused_before_building(job, monkeypatch):
    huge = ModelConfig.from_preset("paper-big", src_vocab_size=32000, tgt_vocab_size=32000)
    assert check_fits(huge, torch.device("cpu"), free=2**40) > 200e6
    with pytest.raises(ValueError, match=r"needs about 3\.1 GiB .* has 1\.0 GiB free"):
        check_fits(huge, torch.device("cpu"), free=2**30)
    with pytest.raises(ValueError, match="Cannot start: this model has .* GiB"):
        monkeypatch.setattr(bundle_module, "free_memory", lambda device: 2**30)
        job.start(replace(QUICK, preset="paper-big"))  # 185M parameters need 2.9 GiB
    assert job.view().state == "idle"


def test_a_model_above_a_billion_parameters_is_refused_in_one_line(job, toasts):
    picker, line, _ = tab.start(job, *panel(d_model=65536))
    assert picker == gr.skip()  # the picker stays as it was
    assert line == tab.md("**Not started:** this model has 103.7B parameters; the studio trains at most 1B (paper-big "
                          "has 0.18B). Choose fewer layers or a smaller d_model or d_ff.").replace("\\*", "*")
    # ModelConfig's own check, in the panel's words
    picker, line, download = tab.start(job, *panel(d_model=64, n_heads=3))
    assert picker == download == gr.skip() and line.startswith("**Not started:** d\\_model \\(64\\)")
    assert "allowed heads for this d\\_model: 1, 2, 4, 8, 16, 32, 64" in line  # the set-up panel's names
    assert toasts == []  # on the line under the buttons only: a toast covered the boxes it named
    assert job.view().state == "idle" and job.registry.names() == []


def test_a_model_large_for_a_cpu_starts_with_a_notice(job, toasts, monkeypatch):
    notice = run_setup.cpu_notice(58_400_000, torch.device("cpu"))
    assert notice.startswith("Large for a CPU: 58.4M parameters, 8× the small preset (7.6M). Every training step "
                             "will take seconds")
    assert run_setup.cpu_notice(58_400_000, torch.device("cuda")) == ""  # a GPU: no notice
    assert run_setup.cpu_notice(7_600_000, torch.device("cpu")) == ""  # the small preset: none
    monkeypatch.setattr(run_setup.limits, "CPU_NOTICE_PARAMETERS", 1_000)  # the tiny model counts as large
    tab.start(job, *panel(max_steps=2))
    view = wait_for(job, lambda v: v.settings is not None)
    params = int(view.facts["parameters"].replace(",", ""))
    notice = run_setup.cpu_notice(params, torch.device("cpu"))
    assert f"{params / 1e6:.1f}M parameters" in notice and f"**{tab.md(notice)}**" in live.status(view)  # it trains


def test_a_vocabulary_that_leaves_the_data_unknown_gives_a_notice():
    from core.data.batching import Example, unknown_share
    from core.training.prepare import RunNotes

    def notes(train, rare_words):
        return RunNotes(len(train), 1, unknown_share=unknown_share(train), unknown_from_rare_words=rare_words)

    train = [Example([3, 3, 7, 2], [1, 3, 8, 2])]  # three of five words are <unk>
    notice = run_setup.vocabulary_notice(notes(train, False), 5)
    assert notice.startswith("60% of the training tokens are <unk>: a vocabulary of 5 does not cover this data")
    assert notice.endswith("give a larger vocabulary.")
    assert run_setup.vocabulary_notice(notes(train, True), 40).endswith("words seen only once in the training data.")
    assert run_setup.vocabulary_notice(notes([Example([7, 2], [1, 8, 2])], False), 8000) == ""
