"""The models on offer (studio/server/registry.py): a checkpoint of a model serving both directions is offered under
a name per direction, one model loaded once, each name bound to its direction; checkpoint folders are scanned and
loaded on first use; head ablation runs on a private copy of a model."""
from __future__ import annotations

import json

import pytest
import torch

from core.checkpoint import save_checkpoint
from studio.server.registry import GERMAN_EXAMPLES, ModelRegistry, direction_names, examples_for, trained_on
from tests.helpers.models import two_way_bundle
from tests.helpers.studio import SENTENCES, studio_bundle


def test_a_two_way_checkpoint_is_offered_once_per_direction(tmp_path):
    save_checkpoint(tmp_path / "tatoeba-en-es", two_way_bundle())
    registry = ModelRegistry(tmp_path)
    assert registry.names() == ["tatoeba-en-es", "tatoeba-es-en"]
    to_es, to_en = registry.get("tatoeba-en-es"), registry.get("tatoeba-es-en")
    assert to_es.model is to_en.model
    assert (to_es.info["tgt_lang"], to_en.info["tgt_lang"]) == ("es", "en")
    assert to_en.tokenizer.tokens(to_en.tokenizer.encode("Hola."))[0] == "<2en>"


def test_names_follow_the_folder_and_a_broken_config_keeps_its_name(tmp_path):
    folder = tmp_path / "pair"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"directions": [["en", "es"], ["es", "en"]]}))
    assert direction_names(folder) == {"pair": "es", "pair-es-en": "en"}
    (folder / "config.json").write_text("{not json")
    assert direction_names(folder) == {"pair": None}


def test_a_models_languages_are_known_without_loading_it(tmp_path):
    save_checkpoint(tmp_path / "tatoeba-en-es", two_way_bundle())
    registry = ModelRegistry(tmp_path)
    assert registry.languages("tatoeba-en-es") == ("en", "es") and registry.languages("tatoeba-es-en") == ("es", "en")
    assert registry.languages("nothing") is None and not registry._bundles  # nothing was loaded to say it


def test_a_saved_two_way_folder_is_offered_both_ways_and_removing_a_name_forgets_its_direction(tmp_path):
    save_checkpoint(tmp_path / "mine-en-es", two_way_bundle())
    registry = ModelRegistry(None)
    assert registry.add_folder(tmp_path / "mine-en-es") == "mine-en-es"
    assert registry.names() == ["mine-en-es", "mine-es-en"]
    assert registry.get("mine-es-en").info["tgt_lang"] == "en"
    registry.remove("mine-es-en")
    assert "mine-es-en" not in registry._targets and registry._loaded  # the other name still holds the model
    registry.remove("mine-en-es")
    assert registry.names() == [] and not registry._loaded


def test_two_way_views_read_the_source_with_its_tag_when_given_an_unbound_bundle():
    from core.inference.scoring import prepare_pair
    from core.inference.stepwise_beam import BeamStepper
    bundle = two_way_bundle()  # not bound by toward(): the first direction, en -> es
    assert prepare_pair(bundle, "Hello.", "Hola.").source_tokens[0] == "<2es>"
    assert BeamStepper(bundle, "Hello.").source.tokens[0] == "<2es>"


def test_registry_scans_checkpoint_folders_and_loads_lazily(tmp_path):
    save_checkpoint(tmp_path / "tiny-a", studio_bundle())
    (tmp_path / "not-a-checkpoint").mkdir()
    registry = ModelRegistry(tmp_path)
    assert registry.names() == ["tiny-a"]
    assert registry.get("tiny-a").model.num_parameters() == studio_bundle().model.num_parameters()
    registry.add("trained here", studio_bundle())
    assert registry.names() == ["tiny-a", "trained here"]
    with pytest.raises(LookupError):
        registry.get("nope")


def test_ablation_runs_on_a_private_copy(registry):
    model, lock = registry.ablation_model("studio-tiny")
    original = registry.get("studio-tiny").model
    assert model is not original and registry.ablation_model("studio-tiny")[0] is model
    assert model.generator.weight is model.tgt_embed.weight  # tying survives the copy
    assert torch.equal(model.generator.weight, original.generator.weight)


def test_the_studio_opens_on_the_general_german_model_where_it_is_offered(tmp_path):
    save_checkpoint(tmp_path / "a-caption-model", studio_bundle())
    registry = ModelRegistry(tmp_path)
    assert registry.default() == "a-caption-model"  # absent: the first offered
    save_checkpoint(tmp_path / "tatoeba-de-en", studio_bundle())
    assert ModelRegistry(tmp_path).default() == "tatoeba-de-en"
    assert ModelRegistry(None).default() is None


def test_the_status_line_says_what_a_model_learnt_from():
    assert trained_on({"data": {"source": "files:/x/multi30k"}}) == "Multi30k image captions (the benchmark)"
    both = {"data": {"source": "files:/x/tatoeba-deu-eng/deu-eng-full.tsv.gz", "added_training": [
        {"source": "files:/x/multi30k", "pairs": 29000}]}}
    assert trained_on(both) == "Tatoeba's everyday sentences and Multi30k image captions (the benchmark)"
    assert trained_on({"data": {"source": "synthetic:numbers"}}) == "the synthetic numbers task"
    assert trained_on({}) == trained_on({"data": "odd"}) == ""


def test_examples_come_from_the_model_or_german_for_de_en():
    assert examples_for(studio_bundle()) == SENTENCES
    bundle = studio_bundle()
    de_en = type(bundle)(bundle.model, bundle.tokenizer, {"name": "multi30k-de-en-small"})
    assert examples_for(de_en) == GERMAN_EXAMPLES
    assert examples_for(type(bundle)(bundle.model, bundle.tokenizer, {"name": "x"})) == []
