"""Issue 8: the Train tab and its process-wide training job, driven from Python — start, pause,
resume, stop, save on a synthetic task (tiny model, a few dozen steps), the live view, the
attention timeline, and bad input: paths outside the data folders, malformed TSV, a model
too large for memory, NaN loss."""
from __future__ import annotations

import math
import tempfile
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go
import pytest
import torch

import core.bundle as bundle_module
import core.training.prepare
from core.bundle import check_fits, parameter_count
from core.checkpoint import FILES as CHECKPOINT_FILES
from core.checkpoint import load_checkpoint
from core.inference.translation import translate_detailed
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from studio import shell
from studio.server.registry import ModelRegistry
from studio.server.uploads import open_checkpoint
from studio.tabs import model_view
from studio.train import form, live, sources, tab
from studio.train import job as training
from studio.train import plots as train_plots
from studio.train import setup as run_setup
from studio.train.job import JobBusy, TrainingJob
from tests.helpers.jobs import QUICK, few_eval_sentences, job, wait_for  # noqa: F401 (fixtures)
from tests.helpers.studio import studio_bundle, toasts  # noqa: F401 (a fixture)


def same_output(a, b) -> bool:
    """Both models translate alike (translate_detailed: a barely trained model's outputs run to
    the length limit, which translate() would warn about)."""
    return [r.ids for r in translate_detailed(a, ["4 2"], method="greedy")] == [
        r.ids for r in translate_detailed(b, ["4 2"], method="greedy")]


def panel(**changes) -> list:
    """The set-up panel's values in FIELDS order: the tab's defaults, changed."""
    d = form.DEFAULTS
    layers, d_model, heads, d_ff, dropout = form.preset_values(d.preset)
    values = dict(kind=sources.SOURCES[0], task="numbers", path="", upload=None, hf_name="", src_lang="",
                  tgt_lang="", limit=0, name="live-numbers", preset=d.preset, layers=layers, d_model=d_model,
                  n_heads=heads, d_ff=d_ff, dropout=dropout, vocab_size=d.vocab_size, max_steps=30, warmup=10,
                  lr_factor=d.lr_factor, label_smoothing=d.label_smoothing, max_tokens=256, clip_norm=0,
                  eval_every=10, attention_every=5, positional="sinusoidal", separate_vocab=False, schedule="noam",
                  peak_lr=d.peak_lr, keep_best="off", patience=0)
    values.update(changes)
    return [values[f] for f in form.FIELDS]


# ----- a run from start to finish ----------------------------------------------------------------
def test_run_pause_resume_finish_and_save(job):
    name = job.start(QUICK)
    assert name == "live-numbers" and job.registry.names() == ["live-numbers"]  # usable at once
    with pytest.raises(JobBusy, match="stop it before starting another"):
        job.start(QUICK)
    wait_for(job, lambda v: v.step >= 3)
    job.pause()
    # "paused" comes at once; the step in progress ends, then the message says where it stopped.
    paused = wait_for(job, lambda v: v.state == "paused" and v.message.startswith("Paused after step"))
    time.sleep(0.3)
    at = job.view().step
    time.sleep(0.3)
    assert job.view().step == at and paused.eta is None
    with pytest.raises(ValueError, match="already paused"):
        job.pause()
    job.resume()
    with pytest.raises(ValueError, match="already going"):
        job.resume()
    view = wait_for(job, lambda v: v.state == "finished")
    assert view.step == 30 and [h["step"] for h in view.history] == list(range(1, 31))
    assert {"loss", "perplexity", "accuracy", "lr", "tokens_per_s", "seconds"} <= set(view.history[0])
    assert [e.step for e in view.evaluations] == [10, 20, 30]
    assert {"val_loss", "exact_match", "bleu"} <= set(view.evaluations[-1].metrics)
    assert len(view.evaluations[-1].samples) == run_setup.SAMPLES_SHOWN
    assert [f.step for f in view.frames] == [0, 5, 10, 15, 20, 25, 30]
    rows, cols = view.example
    assert view.frames[-1].cross.shape == (2, 4, len(rows), len(cols))
    assert torch.allclose(torch.from_numpy(view.frames[-1].cross.sum(-1)), torch.ones(2, 4, len(rows)), atol=1e-4)
    live = job.registry.get("live-numbers")
    assert live.info["step"] == 30 and not live.model.training and live.device.type == "cpu"

    path = job.save("../../etc/my model <1>")  # sanitised, inside the checkpoints folder
    assert path.parent == job.checkpoints_dir and path.name == "etc-my-model-1-step30"
    assert job.save("../../etc/my model <1>").name == "etc-my-model-1-step30-2"  # never replaces
    assert {"etc-my-model-1-step30", "etc-my-model-1-step30-2"} <= set(job.registry.names())  # in the picker
    assert job.save("   ").name == job.save("🙂").name[:-2] == "live-numbers-step30"  # nothing usable: the run's
    saved = load_checkpoint(path)
    assert saved.info["step"] == 30 and saved.info["src_lang"] == "en" and saved.info["name"] == path.name
    # The finished run's own entry in the picker no longer says "(unsaved)": it names its last save.
    assert dict(job.registry.choices())["live-numbers (saved as live-numbers-step30-2)"] == "live-numbers"
    assert same_output(saved, live)


def test_stop_while_paused_and_start_again(job):
    job.start(replace(QUICK, max_steps=10_000))
    wait_for(job, lambda v: v.step >= 2)
    job.pause()
    job.stop()
    view = wait_for(job, lambda v: v.state == "stopped")
    assert view.step < 10_000 and "Stopped at step" in view.message
    time.sleep(0.05)
    assert job.view().elapsed == view.elapsed  # the clock stops with the run
    with pytest.raises(ValueError, match="nothing to stop"):
        job.stop()
    job.start(replace(QUICK, max_steps=3, name="second"))  # a finished or stopped run makes room
    wait_for(job, lambda v: v.state == "finished")
    assert job.registry.names() == ["live-numbers", "second"]


def test_a_page_opened_during_a_run_shows_the_runs_set_up(job):
    """A second page (or a reload) showed the defaults under the run's status line: task numbers,
    600 steps, d_model 64 beside 'lecture-demo, 2,000 steps'. It shows the run's, folded as after Start."""
    assert form.setup_of_the_run(job) == (gr.skip(),) * (len(form.FIELDS) + 1)  # no run: left as built
    ours = replace(QUICK, data="synthetic:copy", name="lecture-demo", layers=1, d_model=32, n_heads=2, d_ff=64,
                   dropout=0.0, limit=100, max_steps=3)
    job.start(ours)
    wait_for(job, lambda v: v.state == "finished")
    *values, setup = form.setup_of_the_run(job)
    assert form.settings_from(dict(zip(form.FIELDS, values))) == ours and setup.open is False
    assert values[:2] == [sources.SOURCES[0], "copy"]
    preset_sized = form.form_values(replace(ours, layers=None, d_ff=None))  # None: the preset's size
    sizes = form.preset_values(ours.preset)
    assert [preset_sized[form.FIELDS.index(f)] for f in ("layers", "d_ff")] == [sizes[0], sizes[3]]
    # Other sources: the typed path as the panel takes it, the dataset's name; an upload's box is left empty.
    shared = sources.ROOT.parent / "shared" / "data" / "tatoeba-deu-eng" / "deu-eng.tsv.gz"
    assert form.data_fields(f"files:{shared}:en-de")[:3] == (
        sources.SOURCES[1], "numbers", "../shared/data/tatoeba-deu-eng/deu-eng.tsv.gz:en-de")
    assert form.data_fields("hf:opus_books:de-en") == (sources.SOURCES[3], "numbers", "", None, "opus_books:de-en")
    upload = Path(tempfile.gettempdir()) / f"{sources.UPLOAD_COPY_PREFIX}x1" / "pairs.tsv"
    assert form.data_fields(f"files:{upload}")[:4] == (sources.SOURCES[2], "numbers", "", None)


def test_selecting_the_model_fetches_newer_weights(job):
    job.start(replace(QUICK, max_steps=10_000, eval_every=10_000))
    first = job.registry.get("live-numbers")
    wait_for(job, lambda v: v.step >= 3)
    tab.picked(job, "live-numbers")
    newer = job.registry.get("live-numbers")
    assert newer is not first and newer.info["step"] >= 3
    assert not torch.equal(newer.model.generator.weight, first.model.generator.weight)


def test_a_new_run_under_the_picked_name_is_another_model_for_every_tab(job):
    """The picker keeps its value (no .change of its own): the registry key tells the tabs."""
    from studio.tabs import attention, beam, translate

    job.start(replace(QUICK, max_steps=10_000, eval_every=5))
    first = job.registry.key("live-numbers")
    current = translate.translate(job.registry, "live-numbers", "4 2", "greedy", 1, 0.6, 10, 1, 1.0, 0, 1.0, None)[4]
    search = beam.start(job.registry, "live-numbers", "4 2", 2, 0.6, "gnmt", 10)
    wait_for(job, lambda v: v.last_good_step >= 5)  # a newer snapshot of the same run: the same model
    tab.picked(job, "live-numbers")
    assert job.registry.key("live-numbers") == first and current.key == first
    assert live.tick(job, None, 2, 0, live.Following(True), "live-numbers", first)[-1] == gr.skip()
    assert beam._current(search, job.registry, "live-numbers", "4 2", 2, 0.6, "gnmt", 10) is search
    job.stop()
    wait_for(job, lambda v: v.state == "stopped")
    job.start(replace(QUICK, max_steps=3, layers=1))  # the same name, another model
    renewed = job.registry.key("live-numbers")
    assert renewed != first and renewed[0] == "live-numbers"
    # -> shell.model_key.change
    assert live.tick(job, None, 2, 0, live.Following(True), "live-numbers", first)[-1] == renewed
    # The user has picked another model (its key set by the picker); a tick queued before still names this one.
    assert live.tick(job, None, 2, 0, live.Following(True), "live-numbers", ("another model", 0))[-1] == gr.skip()
    analysis, title, *_ = attention.refresh(job.registry, current, (current, first), attention.TAB_ID, "live-numbers")
    assert analysis is None and "translated with an earlier run of live\\-numbers" in title
    ablated = attention.ablate(job.registry, current, "live-numbers", ["L1 H1"], [], [])  # said on the page
    assert "translated with an earlier run of live\\-numbers" in ablated
    again = beam._current(search, job.registry, "live-numbers", "4 2", 2, 0.6, "gnmt", 10)
    assert again is not search and again.stepper.model.config.encoder_layers == 1  # a new search
    wait_for(job, lambda v: v.state == "finished")


def test_the_model_tab_shows_the_live_runs_schedule(job):
    job.start(replace(QUICK, warmup=30, lr_factor=3.0, max_steps=600, eval_every=600))
    assert model_view.defaults(job.registry, "live-numbers") == (30, 600, QUICK.label_smoothing)
    _, _, _, lr, schedule, *_ = model_view.render(job.registry, "live-numbers", 30, 600, 0.1)
    d_model = job.registry.get("live-numbers").model.config.d_model
    assert max(lr.data[0].y) == pytest.approx(3.0 * d_model ** -0.5 * 30 ** -0.5, rel=0.01)  # as the run's
    assert "lr factor 3, warm-up 30 steps, 600 steps" in schedule


def test_a_corpus_folder_under_shared_data_trains(job, multi30k):
    spec = sources.corpus_path_spec(str(multi30k))
    job.start(replace(QUICK, data=spec, limit=300, vocab_size=300, max_steps=2, name="m30k"))
    view = wait_for(job, lambda v: v.state == "finished")
    assert view.facts["vocabulary"].endswith("(bpe)") and view.facts["pairs"].startswith("300 training")
    assert job.registry.get("m30k").info["src_lang"] == "de"


def test_the_app_mounts_the_train_tab(tmp_path):
    from studio import app

    demo = app.build_app(ModelRegistry(None), checkpoints_dir=tmp_path)
    assert "Train" in {b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)}


# ----- bad input and faults ------------------------------------------------------------------------
def test_corpus_paths_outside_the_data_folders_are_refused(tmp_path):
    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "escape").symlink_to("/etc")
    roots = (data,)
    assert sources.corpus_path_spec(str(data / "corpus"), roots) == f"files:{data / 'corpus'}"
    assert sources.corpus_path_spec(f"{data}/pairs.tsv.gz:en-de", roots) == f"files:{data}/pairs.tsv.gz:en-de"
    assert sources.corpus_path_spec("corpus", roots) == f"files:{data / 'corpus'}"  # as named in a data folder
    with pytest.raises(ValueError, match="'nowhere' is not in them \\(a relative path starts at"):
        sources.corpus_path_spec("nowhere", roots)
    (tmp_path / "data-evil").mkdir()
    (tmp_path / "data-evil" / "x.tsv").write_text("a\tb\n")
    for bad in ("../../etc/passwd", "/etc/passwd", str(data / "escape" / "passwd"), f"{data}/../x.tsv", "",
                str(tmp_path / "data-evil" / "x.tsv")):  # a sibling whose name begins with the folder's: outside
        with pytest.raises(ValueError):
            sources.corpus_path_spec(bad, roots)
    (tmp_path / "up2").mkdir()
    (tmp_path / "up2" / "pairs.tsv").write_text("a\tb\n")
    with pytest.raises(ValueError, match="not uploaded through the studio"):
        sources.uploaded_tsv_spec(str(tmp_path / "up2" / "pairs.tsv"), root=tmp_path / "up")
    # Resolved: ../shared may be a link.
    multi30k = (sources.ROOT.parent / "shared/data/multi30k").resolve()
    assert sources.corpus_path_spec("../shared/data/multi30k") == f"files:{multi30k}"


def test_uploaded_tsv_with_malformed_lines_is_refused_with_line_numbers(job, tmp_path):
    upload = tmp_path / "up" / "pairs.txt"
    upload.parent.mkdir()
    upload.write_text("eins\tone\nzwei two\ndrei\tthree\nvier\n", encoding="utf-8")
    spec = sources.corpus_spec(sources.SOURCES[2], "", "", str(upload), "", uploads=tmp_path / "up")
    assert spec.endswith("/pairs.txt.tsv")  # named as uploaded: the message names the user's file
    with pytest.raises(ValueError, match=r"Cannot start: pairs\.txt\.tsv line 2, 4: fewer than 2 tab-separated "
                                         r"columns"):
        job.start(replace(QUICK, data=spec))
    sources.discard_upload_copy(spec)  # as the Train tab does (this test calls the job itself)
    assert job.view().state == "idle" and job.registry.names() == []
    with pytest.raises(ValueError, match="not uploaded through the studio"):
        sources.uploaded_tsv_spec("/etc/passwd", tmp_path / "up")


def test_uploaded_tsv_trains(job, tmp_path):
    upload = tmp_path / "up" / "pairs.tsv"
    upload.parent.mkdir()
    upload.write_text("".join(f"{n} {n + 1}\t{n + 1} {n}\n" for n in range(60)) + "\n7\t \n", encoding="utf-8")
    spec = sources.corpus_spec(sources.SOURCES[2], "", "", str(upload), "", uploads=tmp_path / "up")
    job.start(replace(QUICK, data=spec, max_steps=4, vocab_size=64, name="tsv"))
    sources.discard_upload_copy(spec)  # read: as the Train tab does
    view = wait_for(job, lambda v: v.state == "finished")
    assert view.facts["vocabulary"].endswith("(bpe)") and job.registry.names() == ["tsv"]
    # Said on the status line: the two lines left out, and that 58 pairs can only be learnt by heart.
    assert view.facts["notice"] == ("2 pairs with an empty side were left out (lines 61, 62). Only 58 training "
                                    "pairs: enough to learn them by heart, not to translate new sentences (the "
                                    "validation figures will stay low).")


def test_an_uploaded_tsvs_copy_is_deleted_once_read_or_refused(job, tmp_path, monkeypatch):
    """Every Start copied the upload (up to 200 MB) into a temporary folder that stayed, refused Starts'
    too: on a public studio, Start pressed during another visitor's run filled /tmp."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))  # where the studio takes uploads from
    upload = tmp_path / "pairs.tsv"
    upload.write_text("".join(f"{n} {n + 1}\t{n + 1} {n}\n" for n in range(60)), encoding="utf-8")
    copies = lambda: set(Path(tempfile.gettempdir()).glob(f"{sources.UPLOAD_COPY_PREFIX}*"))  # noqa: E731
    before = copies()
    from_upload = dict(kind=sources.SOURCES[2], upload=str(upload), name="tsv", vocab_size=64, max_steps=3)
    assert tab.start(job, *panel(**from_upload, n_heads=3))[1].startswith(tab.NOT_STARTED)  # 64 / 3 heads
    assert copies() == before
    assert not tab.start(job, *panel(**from_upload))[1].startswith(tab.NOT_STARTED)
    assert copies() == before  # read: the run needs it no more
    wait_for(job, lambda v: v.state == "finished")
    job.start(replace(QUICK, max_steps=10_000))
    assert "one at a time" in tab.start(job, *panel(**from_upload))[1] and copies() == before


def test_hugging_face_offline_message_reaches_the_user(job, monkeypatch):
    spec = sources.corpus_spec(sources.SOURCES[3], "", "", None, " bentrevett/multi30k ")
    assert spec == "hf:bentrevett/multi30k"

    def offline(spec, *args, **kwargs):
        raise ValueError(f"{spec}: huggingface.co is unreachable; set HF_HUB_OFFLINE=1 to use a cached copy")

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a studio started with the network allowed
    monkeypatch.setattr(core.training.prepare, "load_corpus", offline)
    with pytest.raises(ValueError, match="Cannot start: hf:bentrevett/multi30k: huggingface.co is unreachable"):
        job.start(replace(QUICK, data=spec))
    with pytest.raises(ValueError, match="Hugging Face dataset name"):
        sources.corpus_spec(sources.SOURCES[3], "", "", None, "  ")


def test_offline_a_hugging_face_dataset_not_in_the_cache_is_refused_at_once(job, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as the studio runs
    monkeypatch.setattr(sources, "hf_cache_dirs", lambda: (tmp_path / "hub", tmp_path / "datasets"))
    loaded = []

    def loader(spec, *args, **kwargs):
        loaded.append(spec)
        raise ValueError("the loader's own message")

    monkeypatch.setattr(core.training.prepare, "load_corpus", loader)
    with pytest.raises(ValueError, match=r"^Cannot start: the Hugging Face dataset bentrevett/multi30k is not in "
                                         r"this machine's Hugging Face cache, and the studio runs offline"):
        job.start(replace(QUICK, data="hf:bentrevett/multi30k"))
    assert loaded == []  # refused before the slow loader is even imported
    (tmp_path / "hub" / "datasets--bentrevett--multi30k").mkdir(parents=True)
    (tmp_path / "datasets" / "opus_books").mkdir(parents=True)
    assert sources.hf_cached("bentrevett/multi30k") and sources.hf_cached("opus_books")
    with pytest.raises(ValueError, match="the loader's own message"):  # cached: handed to the loader
        job.start(replace(QUICK, data="hf:opus_books:de-en"))
    assert loaded == ["hf:opus_books:de-en"]
    hf_box = next(b for b in tab_blocks(tmp_path) if getattr(b, "placeholder", None) == "bentrevett/multi30k")
    assert "only one already in this machine's Hugging Face cache (the studio runs offline" in hf_box.label


def tab_blocks(tmp_path) -> list:
    """The components of an app with the Train tab."""
    from studio.app import build_app

    return list(build_app(ModelRegistry(None), checkpoints_dir=tmp_path / "checkpoints").blocks.values())


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


def test_errors_while_building_leave_the_app_usable(job, monkeypatch):
    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: not enough memory")

    monkeypatch.setattr(run_setup, "prepare_run", no_memory)
    with pytest.raises(ValueError, match="Cannot start: DefaultCPUAllocator"):
        job.start(QUICK)
    monkeypatch.undo()
    job.start(replace(QUICK, max_steps=2))
    assert wait_for(job, lambda v: v.state == "finished").step == 2


def test_nan_loss_stops_training_and_keeps_the_last_good_weights(job):
    job.start(replace(QUICK, max_steps=10_000, eval_every=5))
    wait_for(job, lambda v: v.last_good_step and v.last_good_step >= 5)
    job.pause()
    wait_for(job, lambda v: v.message.startswith("Paused after step"))  # the step under way has ended
    good = job.view().last_good_step
    with torch.no_grad():
        job._run.trainer.model.encoder_layers[0].ffn.w1.weight.fill_(math.nan)
    job.resume()
    view = wait_for(job, lambda v: v.state == "failed")
    assert "NaN" in view.message and f"last good weights (step {good})" in view.message
    assert view.last_good_step == good >= 5
    assert training.weights_finite(job.registry.get("live-numbers"))
    path = job.save("")
    assert path.name == f"live-numbers-step{good}" and training.weights_finite(load_checkpoint(path))


# ----- the tab's callbacks -------------------------------------------------------------------------
def test_a_name_taken_by_another_model_is_refused(tmp_path):
    registry = ModelRegistry(None)
    registry.add("shipped", studio_bundle())  # an entry the job did not make
    job = TrainingJob(registry, tmp_path)
    with pytest.raises(ValueError, match="'shipped' is already in the picker"):
        job.start(replace(QUICK, name="shipped"))
    assert registry.get("shipped") is studio_bundle()


def test_start_refusals_come_as_messages(job):
    assert tab.start(job, *panel(kind=sources.SOURCES[1], path="../../etc/passwd"))[0] == gr.skip()
    assert job.view().state == "idle"
    with pytest.raises(ValueError, match="steps must be a whole number"):
        form.settings_from(dict(zip(form.FIELDS, panel(max_steps=0))))
    with pytest.raises(ValueError, match="dropout"):
        form.settings_from(dict(zip(form.FIELDS, panel(dropout=None))))
    # The boxes have no Gradio bounds (its refusal names no box): these messages name each one.
    for field, bad, words in (("max_steps", -5, "steps must be a whole number of at least 1"),
                              ("d_model", 2.5, "d_model must be a whole number"),
                              ("dropout", 1.5, "dropout must be a number from 0 to 0.9"),
                              ("lr_factor", 0, "lr factor must be a number above 0"),
                              ("warmup", None, "warm-up steps must be a whole number of at least 1, got an empty box")):
        with pytest.raises(ValueError, match=words):
            form.settings_from(dict(zip(form.FIELDS, panel(**{field: bad}))))


def enabled(buttons) -> set[str]:
    """The names of the Train tab's buttons that are enabled."""
    return {name for name, button in zip(live.BUTTONS, buttons, strict=True) if button.interactive}


class Page:
    """One browser page of the Train tab at the callback level, wired as the app wires it: the value
    and properties each component shows (a gr.State: what it holds), changed by an event's reply as
    Gradio changes them (gr.skip() leaves an output alone). A reply can be computed (call) and
    applied later (apply), as a busy machine delivers one after a newer tick's."""

    def __init__(self, job: TrainingJob, session: str = "lecturer"):
        from studio.shell import Shell

        with gr.Blocks() as demo:
            picker = gr.Dropdown(choices=[], value=None)
            with gr.Tab("Train") as train_tab:
                tab.build(Shell(job.registry, picker, demo, gr.State(None)), job, train_tab, gr.State(live.TAB_ID))
        self.fns = list(demo.fns.values())
        self.events = {fn.api_name: fn for fn in self.fns if fn.api_name}
        self.shown = {block._id: {"value": getattr(block, "value", None), "interactive": getattr(block, "interactive",
                                                                                                  None)}
                      for block in demo.blocks.values()}
        self.status_id = next(b._id for b in demo.blocks.values() if getattr(b, "elem_id", None) == "train-status")
        labels = {"Start": "start", "Pause": "pause", "Resume": "resume", "Stop": "stop", "Save checkpoint": "save"}
        self.buttons = {labels[b.value]: b._id for b in demo.blocks.values()
                        if isinstance(b, gr.Button) and b.value in labels}
        self.request = gr.Request(session_hash=session)

    def call(self, api_name: str) -> tuple:
        """The event's reply, computed now from what the page shows."""
        return self._reply(self.events[api_name])

    def _reply(self, fn) -> tuple:
        from gradio.helpers import special_args

        inputs, *_ = special_args(fn.fn, [self.shown[block._id]["value"] for block in fn.inputs], self.request)
        reply = fn.fn(*inputs)
        return reply if isinstance(reply, tuple) else (reply,) if fn.outputs else ()

    def apply(self, api_name: str, reply: tuple) -> None:
        self._apply(self.events[api_name], reply)

    def _apply(self, fn, reply: tuple) -> None:
        for block, value in zip(fn.outputs, reply, strict=True):
            if value == gr.skip():
                continue
            if isinstance(value, gr.components.Component):  # an update: the properties it was given
                self.shown[block._id].update(sent(value))
            else:
                self.shown[block._id]["value"] = value

    def run(self, api_name: str) -> None:
        self.apply(api_name, self.call(api_name))

    def click(self, api_name: str) -> None:
        """The event, then the events chained after it (.then), each reply applied before the next runs."""
        chain = [self.events[api_name]]
        while chain:
            fn = chain.pop(0)
            self._apply(fn, self._reply(fn))
            chain += [then for then in self.fns if then.trigger_after == fn._id]

    @property
    def status(self) -> str:
        return self.shown[self.status_id]["value"]

    @property
    def enabled(self) -> set[str]:
        return {name for name, block_id in self.buttons.items() if self.shown[block_id]["interactive"]}


def test_buttons_follow_the_jobs_state_and_pause_says_so_at_once(job):
    # Idle: nothing to pause or save.
    assert enabled(live.tick(job, None, 2, 0, live.Following(True), None, None)[8:13]) == {"start"}
    tab.start(job, *panel(max_steps=10_000))
    wait_for(job, lambda v: v.step >= 2)
    assert enabled(live.tick(job, None, 2, 0, live.Following(True), None, None)[8:13]) == {"pause", "stop", "save"}
    page = Page(job)
    page.click("train_pause")  # the status line and buttons come back with the click (the tick it sets off)
    assert "**Paused**" in page.status and "The step under way ends first" in page.status
    assert page.enabled == {"resume", "stop", "save"}
    view = wait_for(job, lambda v: "Paused after step" in v.message)  # then where it stopped
    assert f"Paused after step {view.step}; press Resume" in view.message
    page.click("train_resume")
    assert "**Training**" in page.status and page.enabled == {"pause", "stop", "save"}
    page.click("train_stop")
    assert page.enabled in ({"save"}, {"start", "save"})  # stopping, or stopped already
    wait_for(job, lambda v: v.state == "stopped")
    assert enabled(live.buttons(job.view())) == {"start", "save"}
    failed = replace(job.view(), state="failed", last_good_step=None)  # NaN from the first step: nothing to save
    assert enabled(live.buttons(failed)) == {"start"}


@pytest.mark.parametrize("action", ["pause", "resume", "stop"])
def test_a_late_reply_to_a_button_leaves_the_page_on_the_runs_true_state(job, action):
    """Issue 46: a button's reply reaching the page after the once-a-second tick had drawn a newer state
    (a busy machine) left the page on the older one for good ("Stopping after the current step…" with
    Start greyed out, after the run had stopped), since the tick sends nothing while the run is unchanged."""
    page = Page(job)
    job.start(replace(QUICK, max_steps=10_000))
    wait_for(job, lambda v: v.step >= 2)
    if action == "resume":
        job.pause()
        wait_for(job, lambda v: v.message.startswith("Paused after step"))
    page.run("train_view")
    late = page.call(f"train_{action}")  # the click's reply, computed at the click
    if action == "pause":  # the run moves on: it pauses after the step under way...
        wait_for(job, lambda v: v.message.startswith("Paused after step"))
    else:  # ...or it stops (resumed, then stopped by the time limit or another page)
        if action == "resume":
            job.stop()
        wait_for(job, lambda v: v.state == "stopped")
    page.run("train_view")  # a tick draws that
    page.apply(f"train_{action}", late)  # and the click's reply reaches the page after it
    page.run("train_view")
    fresh = Page(job)
    fresh.run("train_view")
    assert page.status == fresh.status and page.enabled == fresh.enabled
    expected = {"pause": ("**Paused**", f"Paused after step {job.view().step:,}", {"resume", "stop", "save"}),
                "resume": ("**Stopped**", "Stopped at step", {"start", "save"}),
                "stop": ("**Stopped**", "Stopped at step", {"start", "save"})}[action]
    assert page.status.startswith(expected[0]) and expected[1] in page.status and page.enabled == expected[2]


def test_callbacks_start_pause_resume_stop_save(job):
    picker, line, download = tab.start(job, *panel(max_steps=10_000))
    # Offered, not picked: the page keeps the model its user picked (issue 51) until "Use the live model".
    assert "value" not in picker.constructor_args and f"**{tab.USE_LIVE}**" in line
    assert picker.choices == [("live-numbers (unsaved)", "live-numbers")]
    assert tab.use_live(job, None).value == "live-numbers"
    assert download.visible is False  # the last save's line and download go together
    assert tab.fold_setup(line).open is False  # started: the set-up folds away for the curves
    refused = tab.start(job, *panel())[1]  # another run is going: this page's set-up stays open
    assert refused.startswith("**Not started:**") and tab.fold_setup(refused) == gr.skip()
    assert job.view().state == "running"  # the refused start left the run going
    wait_for(job, lambda v: v.step >= 2)
    tab.control(job, "pause")
    assert job.view().state == "paused"
    tab.control(job, "resume")
    assert job.view().state == "running"
    message, picker, download = tab.save(job, "demo", "live-numbers")
    assert "Saved **demo\\-step" in message and picker.value == "live-numbers"
    assert any(str(choice[0]).startswith("demo-step") for choice in picker.choices)  # (label, value) pairs
    # The live run's entry holds the weights just saved, and says where they are.
    labels = dict((value, label) for label, value in picker.choices)
    [saved] = [value for value in labels if value.startswith("demo-step")]
    assert labels["live-numbers"] == f"live-numbers (saved as {saved})" and labels[saved] == saved
    assert download.visible and download.value["path"].endswith(".zip") and "Download demo-step" in download.label
    tab.control(job, "stop")
    wait_for(job, lambda v: v.state == "stopped")
    # Stopped after more steps: the live model's newest weights are unsaved again.
    labels = dict((value, label) for label, value in shell.picker_update(job.registry, "live-numbers").choices)
    assert labels["live-numbers"] == ("live-numbers (unsaved)" if job.view().step > int(saved.split("step")[1])
                                      else f"live-numbers (saved as {saved})")
    with pytest.raises(gr.Error, match="Nothing is training"):  # nothing to pause: a refusal the API answers as one
        tab.control(job, "pause")
    message, _, download = tab.save(TrainingJob(ModelRegistry(None)), "x", None)
    assert "Not saved" in message and not download.visible


def sent(update: gr.Dropdown) -> dict:
    """What a component returned as an update sends to the page: the arguments given, not its defaults."""
    return update._constructor_args[0]


def test_an_older_snapshot_never_replaces_a_newer_one(job):
    """The training thread and a page's refresh() both publish: the slower of the two could put older
    weights back in the picker, and the step published was read when publishing, not when taken."""
    job.start(replace(QUICK, max_steps=6))
    wait_for(job, lambda v: v.state == "finished")
    run = job._run
    newest = job.registry.get("live-numbers")
    older = run.trainer.snapshot()
    older.info["step"] = 2  # as if taken at step 2
    job._publish(run, older)
    assert job.registry.get("live-numbers") is newest and run.last_good is newest and run.last_good_step == 6
    job.save("kept")  # Save offers its snapshot under the run's name the same way
    assert job.registry.choices()[-1] == ("live-numbers (saved as kept-step6)", "live-numbers")


def test_a_picked_model_removed_meanwhile_is_unpicked(job):
    """Picker choices without the picked name kept it as the page's value: Gradio then refused every event
    reading the picker ("Value: doomed is not in the list of choices"), the one-second tick included."""
    job.registry.add("doomed", studio_bundle())
    first = live.tick(job, None, 2, 0, live.Following(True), "doomed", None)
    assert "value" not in sent(first[-2])  # still offered: a pick made meanwhile is left alone
    job.registry.remove("doomed")  # an upload evicted, or a public studio's earlier run
    later = live.tick(job, first[0], 2, 0, live.Following(True), "doomed", None)
    assert sent(later[-2]) == {"choices": [], "value": None}
    assert sent(shell.picker_update(job.registry, "doomed"))["value"] is None


def test_a_new_run_under_the_last_runs_name_says_it_replaces_it(job, toasts):
    assert tab.start(job, *panel(max_steps=3))[1].startswith("*live\\-numbers is in the model picker")
    wait_for(job, lambda v: v.state == "finished")
    said = tab.start(job, *panel(max_steps=3))[1]
    assert said.startswith("*The earlier run called live\\-numbers is replaced by this one")
    assert tab.fold_setup(said).open is False  # it started: the set-up folds away all the same
    wait_for(job, lambda v: v.state == "finished")


def test_a_saved_checkpoint_downloads_as_a_zip_the_studio_opens_again(job, monkeypatch):
    job.start(replace(QUICK, max_steps=5))
    wait_for(job, lambda v: v.state == "finished")
    first = job.zip_saved(job.save("first"))
    archive = job.zip_saved(job.save("second"))
    assert not first.exists()  # only the newest .zip is kept
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(f"second-step5/{name}" for name in CHECKPOINT_FILES)
    registry = ModelRegistry(None)
    picker, _ = open_checkpoint(registry, [str(archive)], None)
    assert picker.value == "second-step5"  # under its saved name, not the run's
    reopened = registry.get(picker.value)
    assert same_output(reopened, job.registry.get("second-step5"))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zipfile.ZipFile, "write", full_disk)
    message, picker, download = tab.save(job, "third", None)
    assert "Saved **third\\-step5**" in message and "No download" in message and "No space left" in message
    assert not download.visible and not list(archive.parent.glob("*.zip"))  # no half-written .zip offered
    assert "third-step5" in job.registry.names()  # the checkpoint itself was saved


def test_evaluations_are_read_out_now_and_then_not_at_every_one():
    """A live run evaluates every second or two: a screen reader hears the newest at most every
    HEARD_EVERY_S seconds of training, a new run's first at once, and the last when the run ends."""
    def view(run, state, *evaluations):
        return training.JobView(7, state, "", None, {}, 0, 0, 0.0, None, [],
                                [training.Evaluation(step, seconds, {"val_loss": 1.5, "exact_match": 0.5}, [])
                                 for step, seconds in evaluations], [], None, None, run=run)

    first_look = live.Seen()
    assert live.evaluation_heard(view(1, "running", (50, 2.0)), first_look) == ("", (1, 50, 2.0))  # shown, not said
    seen = live.Seen(version=7, heard=(1, 50, 2.0))
    assert live.evaluation_heard(view(1, "running", (50, 2.0), (100, 4.0)), seen) == ("", (1, 50, 2.0))
    due = 2.0 + live.HEARD_EVERY_S
    said, heard = live.evaluation_heard(view(1, "running", (50, 2.0), (400, due)), seen)
    assert said == "Evaluation at step 400: validation loss 1.500, exact match 50%." and heard == (1, 400, due)
    heard_last = live.evaluation_heard(view(1, "finished", (50, 2.0), (100, 4.0)), seen)[0]
    assert heard_last.startswith("Evaluation at step 100")
    assert live.evaluation_heard(view(2, "running", (50, 1.0)), seen)[1] == (2, 50, 1.0)  # another run: at once
    assert live.evaluation_heard(view(1, "finished", (50, 2.0)), seen)[0] == ""  # heard already


def test_live_view_redraws_only_when_something_changed(job):
    first = live.tick(job, None, 2, 0, live.Following(True), None, None)
    assert isinstance(first[0], live.Seen) and "No training yet" in first[1]
    assert all(out == gr.skip() for out in live.tick(job, first[0], 2, 0, live.Following(True), None, None))
    job.start(replace(QUICK, name="<b>mine</b>"))
    view = wait_for(job, lambda v: v.state == "finished")
    assert first[-3] == gr.skip()  # the page's first look at the job is not read out
    seen, state, bar, curves, metrics, samples, layer, head, *buttons, timeline, attention, spoken, picker, key = (
        live.tick(job, first[0], 2, 1, live.Following(True), None, None))
    assert enabled(buttons) == {"start", "save"}  # finished
    assert spoken.startswith("Finished at step 30")  # a state changed since the last look: read out, once
    assert "Evaluation at step 30: validation loss" in spoken and "exact match" in spoken  # ...with its last one
    assert "&lt;b&gt;mine&lt;/b&gt;" in state and "<b>" not in state and "Finished" in state
    assert f'value="{view.step}"' in bar and "Step 30 of 30" in bar
    assert isinstance(curves, go.Figure) and len(curves.data) >= 9
    titles = [a.text for a in curves.layout.annotations]  # the subplots' titles: none wider than its panel
    assert titles[-1] == "Exact match / BLEU" and max(map(len, titles)) <= 25
    # The speed panel draws a running mean: step by step it swung 3k-22k tokens/s, noise on a projector.
    speed = next(t for t in curves.data if t.xaxis == "x5")
    raw = [h["tokens_per_s"] for h in view.history]
    window = train_plots.SPEED_WINDOW
    assert speed.y[-1] == pytest.approx(sum(raw[-window:]) / window) and speed.y[0] == raw[0]
    perplexity = curves.layout.yaxis2  # log axis: 1, 2, 5, 10, 20, 50 written in full, not D2's "5, 2, 10, 5"
    assert perplexity.type == "log" and perplexity.dtick is None and perplexity.tickformat == ",d"
    assert {1, 2, 5, 10, 20, 50, 100} <= set(perplexity.tickvals)
    narrow = curves.layout.meta["narrow"]  # on a phone: the six panels in one column, top to bottom
    tops = [narrow[f"yaxis{n or ''}.domain"][1] for n in (0, 2, 3, 4, 5, 6)]
    assert tops == sorted(tops, reverse=True) and all(narrow[f"xaxis{n}.domain"] == [0.0, 1.0] for n in (2, 6))
    assert "Evaluation at step 30" in metrics and "exact match" in metrics
    assert len([line for line in samples.splitlines() if line.startswith("| ")]) == 2 + run_setup.SAMPLES_SHOWN
    assert (layer.maximum, head.maximum, timeline.maximum, timeline.value) == (2, 4, 30, 30)
    assert "Step 30" in attention.layout.title.text and picker.choices == [("<b>mine</b> (unsaved)", "<b>mine</b>")]
    assert key == gr.skip()  # nothing picked: no key to renew
    again = live.tick(job, seen, 2, 1, live.Following(False), None, None)
    assert all(out == gr.skip() for out in again)


def test_the_plots_are_drawn_only_with_the_train_tab_on_screen(job, monkeypatch):
    # Redrawn every second on every page, whatever its tab, they slowed a lecturer's laptop several-fold.
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    with monkeypatch.context() as patched:  # not even built for a page on another tab
        patched.setattr(train_plots, "training_curves", lambda view: pytest.fail("curves built on another tab"))
        elsewhere = live.tick(job, None, 2, 1, live.Following(True), None, None, "translate")
    seen, state, _, curves, _, samples, *_, attention, _, _, _ = elsewhere
    assert "Finished" in state and curves == samples == attention == gr.skip()
    shown = live.tick(job, seen, 2, 1, live.Following(True), None, None, live.TAB_ID)  # the tab is opened
    assert isinstance(shown[3], go.Figure) and "| " in shown[5] and isinstance(shown[-4], go.Figure)
    assert shown[3].layout.uirevision == "run-1"  # a zoom into the curves stays while the run draws on
    ticked = live.tick(job, shown[0], 2, 1, live.Following(True), None, None, "translate")
    assert all(out == gr.skip() for out in ticked)


def test_timeline_scrubs_to_the_nearest_snapshot(job):
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    following = live.Following()
    figure, follow = live.scrub(job, following, 12, 1, 0)
    assert follow is False and figure.layout.title.text.startswith("Step 10: cross-attention, layer 1, mean of 4")
    assert not following.on
    assert "layer 2, head 4" in live.redraw(job, following, 0, 9, 9, True).layout.title.text  # clamped, latest
    assert following.on
    assert live.redraw(job, following, 0, 1, 1, False).layout.title.text.startswith("Step 0:")
    assert not following.on


def test_a_tick_already_running_leaves_a_scrub_alone(job, monkeypatch):
    """The user types a step while a tick, queued when the box still said "follow", is drawing:
    the tick must not put the newest snapshot back over the step asked for."""
    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    following, draw = live.Following(), train_plots.training_attention

    def scrub_while_drawing(*args):
        monkeypatch.setattr(train_plots, "training_attention", draw)  # the scrub itself draws as usual
        live.scrub(job, following, 10, 1, 0)
        return draw(*args)

    monkeypatch.setattr(train_plots, "training_attention", scrub_while_drawing)
    *_, timeline, plot, spoken, picker, key = live.tick(job, None, 2, 0, following, None, None)
    assert plot == gr.skip() and "value" not in timeline.constructor_args  # neither the plot nor the slider's value


def test_synthetic_tasks_have_labels_that_fit_their_box():
    from core.data.tasks import TASKS

    assert set(form.TASK_LABELS) == set(TASKS)  # "numbers: English number 0-999, as lower-case words (…" was cut
    assert all(len(f"{name}: {label}") <= 40 for name, label in form.TASK_LABELS.items())
    assert form.task_described("dates").info == TASKS["dates"].description  # the full description, under the box


def test_defaults_and_lr_line():
    settings = form.settings_from(dict(zip(form.FIELDS, panel(max_steps=form.DEFAULTS.max_steps))))
    assert settings == replace(form.DEFAULTS, limit=None, layers=2, d_model=64, n_heads=4, d_ff=256, dropout=0.0,
                               max_tokens=256, warmup=10, eval_every=10, attention_every=5)
    assert "6.25e-03" in form.peak_lr(64, 100, 0.5)
    assert all("must all be above 0" in form.peak_lr(*bad) for bad in ((64, 100, -1), (-64, 100, 1), (0, 100, 1)))
    assert form.peak_lr(None, 100, 1) == ""  # a box being typed into
    assert form.preset_values("small") == (3, 256, 4, 1024, 0.1)


# ----- a public studio (a Space): one bounded run, controlled by the session that started it ----------
class ManualTimer:
    """threading.Timer's stand-in: fire() runs the function when the test says, not after a real delay
    (with a real one the test had 3 s to reach its pause before the time limit)."""

    made: list["ManualTimer"] = []

    def __init__(self, interval: float, function, args=()):
        self.fire, self.daemon = (lambda: function(*args)), False
        ManualTimer.made.append(self)

    def start(self) -> None:
        pass


def test_a_public_studio_bounds_runs_and_lets_only_their_starter_control_them(tmp_path, monkeypatch):
    monkeypatch.setattr(training.limits, "PUBLIC_MAX_MINUTES", 0.05)  # 3 s, pauses included
    monkeypatch.setattr(training.threading, "Timer", ManualTimer)
    job = TrainingJob(ModelRegistry(None), tmp_path / "checkpoints", public=True)
    with pytest.raises(ValueError, match=r"at most 10M parameters, and this one has 184.5M"):
        job.start(replace(QUICK, preset="paper-big"), "visitor")
    job.start(replace(QUICK, max_steps=10_000), "lecturer")
    view = job.view()  # each page's buttons: only the starter's Pause and Stop act
    assert enabled(live.buttons(view, "visitor")) == set()
    assert {"pause", "stop"} <= enabled(live.buttons(view, "lecturer"))
    for action in ("pause", "resume", "stop"):
        with pytest.raises(ValueError, match=f"started on another page; only that page can {action} it while"):
            getattr(job, action)("visitor")
    with pytest.raises(ValueError, match="only that page can save it"):
        job.save("mine", "visitor")
    view = wait_for(job, lambda v: v.eta is not None)
    assert view.eta <= 3.0  # 10,000 steps to go, but the run ends at the time limit
    with pytest.raises(JobBusy, match="It ends by itself at step 10,000 or 0 minutes after it started"):
        job.start(replace(QUICK, name="mine"), "visitor")
    job.pause("lecturer")
    ManualTimer.made[-1].fire()  # the run's time is up
    view = wait_for(job, lambda v: v.state == "stopped")  # the time limit ends even a paused run
    assert "this public studio's 0-minute limit" in view.message
    saved = job.save("kept", "lecturer").name
    job.start(replace(QUICK, name="next", max_steps=5), "visitor")
    names = job.registry.names()  # the previous live model leaves the picker; its saved copy stays
    assert "next" in names and saved in names and "live-numbers" not in names
    job.release("lecturer")  # a page that did not start this run closing changes nothing
    with pytest.raises(ValueError, match="only that page can save it"):
        job.save("x", "stranger")
    job.wait(300)
    assert enabled(live.buttons(job.view(), "stranger")) == {"start"}
    job.release("visitor")  # its starter's page closed (or reloaded): anyone may act on the run now
    assert enabled(live.buttons(job.view(), "stranger")) == {"start", "save"}
    assert job.save("theirs", "stranger").name.startswith("theirs-step")
    job.wait(300)


def test_train_buttons_get_the_browser_session_from_gradio(job):
    from gradio.helpers import special_args

    from studio.server.guard import guard

    request = gr.Request(session_hash="abc")
    inputs, *_ = special_args(guard(tab.controller(job, "stop")), [], request)
    assert inputs == [request]  # Gradio passes gr.Request through the guard wrapper
    assert live.session_of(request) == "abc" and live.session_of(None) is None


def test_while_preparing_the_view_shows_no_figures_of_the_last_run(job, monkeypatch):
    import threading

    job.start(replace(QUICK, max_steps=5))
    wait_for(job, lambda v: v.state == "finished")
    release, real_prepare = threading.Event(), training.prepare
    monkeypatch.setattr(training, "prepare",
                        lambda settings, public=False: release.wait(10) and real_prepare(settings, public))
    starting = threading.Thread(target=job.start, args=(replace(QUICK, name="second", max_steps=5),))
    starting.start()
    view = wait_for(job, lambda v: v.state == "preparing")
    assert view.settings is None and view.step == 0 and "building second" in view.message
    assert "Preparing" in live.status(view) and live.progress(view) == ""
    release.set()
    starting.join(300)
    wait_for(job, lambda v: v.state == "finished" and v.settings.name == "second")


def test_the_model_name_follows_the_data_until_the_user_types_one():
    synthetic, corpus, upload, hub = sources.SOURCES
    assert form.default_name(synthetic, "reverse", "", None, "") == "live-reverse"
    assert form.default_name(corpus, "numbers", "../shared/data/multi30k/", None, "") == "live-multi30k"
    assert form.default_name(corpus, "numbers", "tatoeba/deu-eng.tsv.gz:en-de", None, "") == "live-deu-eng"
    assert form.default_name(upload, "numbers", "", "/tmp/gradio/x/my pairs.tsv", "") == "live-my-pairs"
    assert form.default_name(hub, "numbers", "", None, "bentrevett/multi30k") == "live-multi30k"
    assert form.default_name(corpus, "numbers", "", None, "") == "live-model"
    assert form.data_picked(corpus, "numbers", "data/x", None, "", "live-numbers") == "live-x"
    assert form.data_picked(corpus, "numbers", "data/x", None, "", "  ") == "live-x"
    assert isinstance(form.data_picked(corpus, "numbers", "data/x", None, "", "my-lecture"), type(gr.skip()))
    # At Start too: a path pasted just before could reach it with the box still naming the last data.
    fields = dict(kind=corpus, task="numbers", path="tatoeba/deu-eng.tsv.gz:en-de", upload=None, hf_name="")
    assert form.run_name({**fields, "name": "live-multi30k"}) == "live-deu-eng"
    assert form.run_name({**fields, "name": " my-lecture "}) == "my-lecture"


def test_time_left_is_said_in_the_precision_it_has():
    assert live.time_left(401) == "about 7 min left" and live.time_left(120) == "about 2 min left"
    assert live.time_left(119) == "about 2 min left" and live.time_left(84) == "about 80 s left"
    assert live.time_left(44) == "about 40 s left"
    assert live.time_left(9.5) == "a few seconds left"


def test_time_left_follows_the_pace_of_the_last_two_minutes():
    from types import SimpleNamespace

    job = TrainingJob(ModelRegistry(None))
    job._state = "running"
    # 390 s at 1 step/s, then a burst of 30 s at 5 steps/s: over the last 120 s, 240 steps, 2 a second
    # (the last 30 points alone would say 5, and the estimate would drop to 92 s).
    history = [{"step": t, "seconds": t} for t in range(390)]
    history += [{"step": 390 + 5 * t, "seconds": 390 + t} for t in range(31)]
    run = SimpleNamespace(history=history, elapsed=lambda: 420.0, settings=SimpleNamespace(max_steps=1000),
                          trainer=SimpleNamespace(step_count=540))
    assert job._eta(run) == pytest.approx(460 / 2)
    run.history = history[:10]  # fewer than the window's worth: every point counts
    run.elapsed = lambda: 9.0
    assert job._eta(run) == pytest.approx((1000 - 540) / 1)


def test_a_saved_checkpoints_folder_name_keeps_to_the_name_limit(job):
    from studio.server.limits import MAX_NAME_CHARS

    job.start(QUICK)
    wait_for(job, lambda v: v.state == "finished")
    first, second = job.save("n" * MAX_NAME_CHARS), job.save("n" * MAX_NAME_CHARS)  # the second: a "-2" on the clash
    assert first != second and max(len(first.name), len(second.name)) <= MAX_NAME_CHARS
    assert first.name.startswith("nnnn") and first.name.endswith(f"-step{job.view().step}")
