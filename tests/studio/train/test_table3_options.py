"""Issue 42's studio half: the Train tab's Table 3 options (learned positions, separate vocabularies,
the schedules, keep best and patience), Save's "best" beside "latest", and the Positional encoding tab
drawing a model's learned positions."""
from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pytest

from core.checkpoint import load_checkpoint
from core.inference.translation import translate
from studio.server.registry import ModelRegistry
from studio.server.uploads import open_checkpoint
from studio.tabs import attention, positional
from studio.train import form, tab
from tests.helpers.jobs import ENDED, QUICK, wait_for
from tests.helpers.studio import studio_bundle


def test_the_panel_reads_the_table3_options_and_gives_them_back():
    settings = replace(QUICK, positional="learned", separate_vocab=True, schedule="constant", peak_lr=2e-3,
                       keep_best="exact_match", patience=3)
    values = dict(zip(form.FIELDS, form.form_values(settings)))
    assert values["keep_best"] == "exact_match" and values["patience"] == 3 and values["positional"] == "learned"
    read = form.settings_from(values)
    options = ("positional", "separate_vocab", "schedule", "peak_lr", "keep_best", "patience")
    assert [getattr(read, f) for f in options] == [getattr(settings, f) for f in options]
    off = form.settings_from({**values, "keep_best": "off", "patience": 0})
    assert off.keep_best is None and off.patience is None


@pytest.mark.parametrize("field, bad, named", [("peak_lr", 0, "peak lr"), ("patience", -1, "patience"),
                                               ("patience", "x", "patience")])
def test_bad_option_boxes_are_named(field, bad, named):
    values = dict(zip(form.FIELDS, form.form_values(QUICK)))
    with pytest.raises(ValueError, match=named):
        form.settings_from({**values, field: bad})


@pytest.mark.parametrize("settings, said", [
    (replace(QUICK, patience=2), "patience counts evaluations without a better keep best"),
    (replace(QUICK, data="files:data/x", keep_best="exact_match"), "exact_match is for synthetic tasks"),
    (replace(QUICK, keep_best="bleu", eval_every=0), None),
])
def test_keep_best_settings_that_could_never_act_are_refused_before_anything_is_read(job, settings, said):
    with pytest.raises(ValueError, match="Cannot start") as refused:
        job.start(settings)
    assert said is None or said in str(refused.value)
    assert job.view().state == "idle" and not job.registry.names()


def test_a_run_keeping_the_best_saves_best_and_latest_and_says_which(job):
    job.start(replace(QUICK, keep_best="exact_match"))
    view = wait_for(job, lambda v: v.state in ENDED)
    best_step = job._run.best.info["step"]
    assert best_step in [e.step for e in view.evaluations]
    best_score = max(e.metrics["exact_match"] for e in view.evaluations)
    assert [e.metrics["exact_match"] for e in view.evaluations if e.step == best_step] == [best_score]
    message, _, _ = tab.save(job, "", None, which="best")
    assert f"live\\-numbers\\-best\\-step{best_step}" in message and "best evaluation" in message
    best = load_checkpoint(job.checkpoints_dir / f"live-numbers-best-step{best_step}")
    assert best.info["step"] == best_step and best.info["best"]["metric"] == "exact_match"
    message, _, _ = tab.save(job, "", None, which="latest")
    assert f"live\\-numbers\\-step{QUICK.max_steps}" in message and "the latest weights" in message


def test_best_is_refused_clearly_when_the_run_keeps_none(job):
    job.start(QUICK)
    wait_for(job, lambda v: v.state in ENDED)
    message, _, download = tab.save(job, "", None, which="best")
    assert message.startswith("**Not saved:**") and "keeps no best" in message and not download.visible


def test_patience_ends_a_run_that_stopped_improving(job):
    # A rate this small learns nothing by step 10: exact match stays 0, which the second evaluation does not beat.
    job.start(replace(QUICK, max_steps=400, eval_every=5, keep_best="exact_match", patience=1, lr_factor=1e-7))
    view = wait_for(job, lambda v: v.state in ENDED)
    assert view.step == 10 and [e.metrics["exact_match"] for e in view.evaluations] == [0.0, 0.0]


def test_learned_positions_separate_vocabularies_and_a_constant_rate_train_and_are_drawn(job):
    job.start(replace(QUICK, positional="learned", separate_vocab=True, schedule="constant", peak_lr=2e-3))
    wait_for(job, lambda v: v.state in ENDED)
    bundle = job.registry.get("live-numbers")
    assert bundle.model.config.positional == "learned" and bundle.separate_target is not None
    assert job._run.trainer.lr_at(25) == pytest.approx(2e-3)  # constant after warm-up
    # The Attention tab reads the target side with the target's own tokenizer.
    analysis = attention.analyse(bundle, "live-numbers", "4 2", bundle.target_tokenizer.encode("zwei und vierzig"))
    assert analysis.dec_tokens[1:] == ["zwei", "und", "vierzig"]
    shown, table, similarity = positional.learned_view(job.registry, "live-numbers", 12)
    assert shown["visible"] is True
    assert table.data[0].z.shape == (12, bundle.model.config.d_model) and similarity.data[0].z.shape == (12, 12)
    # Its download carries the target's tokenizer, and opens again as the same model.
    archive = job.zip_saved(job.save("both"))
    reopened = ModelRegistry(None)
    picker, _ = open_checkpoint(reopened, [str(archive)], None)
    again = reopened.get(picker.value)
    assert again.separate_target is not None and again.model.config.positional == "learned"
    assert translate(again, ["4 2"], method="greedy") == translate(bundle, ["4 2"], method="greedy")


def test_the_learned_section_stays_hidden_for_sinusoids():
    registry = ModelRegistry(None)
    registry.add("sinusoids", studio_bundle())
    shown, table, _ = positional.learned_view(registry, "sinusoids", 12)
    assert shown["visible"] is False and table == gr.skip()


def test_a_recipe_fills_the_panel_and_none_leaves_it():
    values = dict(zip(form.FIELDS, form.recipe_values("lecture-multi30k")))
    assert values["path"].endswith("multi30k") and (values["src_lang"], values["tgt_lang"]) == ("de", "en")
    assert (values["preset"], values["schedule"], values["max_tokens"]) == ("small", "inverse_sqrt", 12288)
    assert values["name"] == "live-multi30k" and values["d_model"] == 256  # the preset's sizes, shown
    assert form.recipe_values("") == (gr.skip(),) * len(form.FIELDS)
