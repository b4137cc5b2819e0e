"""python -m studio --compiled (studio/server/compiled_models.py): a model's steps warmed, a lone sentence then
decoded through the compiled step and a group batched."""
from __future__ import annotations

from core.inference.options import DecodeOptions
from studio.server import batching, compiled_models
from tests.helpers.studio import SENTENCES, studio_bundle


def test_with_compiled_steps_a_lone_sentence_goes_compiled_and_a_group_batched(monkeypatch):
    """python -m studio --compiled: the warm-up and the choice; torch.compile left out (the static step runs as
    itself, equal to the eager one: tests/core/inference/test_compiled.py), so that this checks the wiring only."""
    from core.inference import compiled

    monkeypatch.setattr(compiled.torch, "compile", lambda module, **options: module)
    monkeypatch.setattr(compiled, "compiler_available", lambda: True)
    monkeypatch.setattr(compiled_models, "compiler_available", lambda: True)
    bundle = studio_bundle()
    warm = compiled_models.CompiledModels()
    monkeypatch.setattr(batching, "COMPILED", warm)
    warm.warm(iter([bundle])).join(120)
    assert warm.ready(bundle.model)
    static = []
    monkeypatch.setattr(compiled, "static_cache", lambda *a, real=compiled.static_cache: static.append(1) or real(*a))
    options = DecodeOptions(beam_size=4, max_len_b=10)
    [alone] = batching._translate_group(bundle, SENTENCES[:1], options, lambda: None)
    assert static and alone.ids == batching.decode_alone(bundle, SENTENCES[0], options).ids
    static.clear()
    batching._translate_group(bundle, SENTENCES, options, lambda: None)
    assert not static  # several sentences: the batched eager decoders
