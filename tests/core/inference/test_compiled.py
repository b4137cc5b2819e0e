"""core.inference.compiled: the decoding step over a static key/value cache equals Transformer.decode_step (its
eager reference) in every search, across a cache bucket's end and with a beam's reordering; compiled, it gives
the same translations; where it does not apply (several sources, a head switched off, no C++ compiler, int8) the
eager step runs or a clear error says why."""
from __future__ import annotations

import torch
from tests.helpers.models import reverse_sources, tiny_bundle
from tests.helpers.tiny import batch, tiny

import pytest
from core.inference import compiled
from core.inference.beam_search import beam_search
from core.inference.compiled import CompiledDecoding, StaticCache
from core.inference.greedy import greedy_decode
from core.inference.options import DecodeOptions
from core.inference.sampling import sample
from core.inference.translation import translate_detailed
from core.model import attention as attention_module
from core.model.cache import DecoderCache
from core.model.scaled_dot_product import attention


def hypotheses_match(a, b) -> None:
    assert [h.ids for h in a] == [h.ids for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("length", [3, 17])  # sources padded to 16 and to 32
def test_the_static_step_searches_as_the_eager_one(length):
    model = tiny()
    static = CompiledDecoding(model, compile_step=False)
    src = batch([length], seed=length)
    # min_len 40: outputs cross the first cache bucket's end (32 positions) into the next.
    for options in (dict(beam_size=4, n_best=4, min_len=40), dict(beam_size=3, n_best=2)):
        hypotheses_match(beam_search(static, src, 60, **options)[0], beam_search(model, src, 60, **options)[0])
    hypotheses_match(greedy_decode(static, src, 60, min_len=40), greedy_decode(model, src, 60, min_len=40))
    hypotheses_match(sample(static, src, 60, seed=3, temperature=1.0), sample(model, src, 60, seed=3, temperature=1.0))


def test_the_static_step_runs_the_models_own_layers_and_kernel(monkeypatch):
    """Not a second decoder: each step over the static cache goes through every decoder layer, and each of its
    attentions through the one kernel of eq. 1 (core/model/scaled_dot_product.py), as the eager step does."""
    model = tiny()
    kernel_calls, layer_calls = [], []
    monkeypatch.setattr(attention_module, "attention", lambda *a, **k: kernel_calls.append(1) or attention(*a, **k))
    for layer in model.decoder_layers:
        layer.register_forward_hook(lambda *_: layer_calls.append(1))
    static = CompiledDecoding(model, compile_step=False)
    cache = static.start_decoding(batch([5]))
    kernel_calls.clear()  # the encoder's
    for token in (1, 7):
        static.decode_step(torch.tensor([token]), cache)
    assert len(layer_calls) == 2 * model.config.decoder_layers
    assert len(kernel_calls) == 2 * 2 * model.config.decoder_layers  # self- and cross-attention, two steps


def test_the_static_step_follows_the_models_options():
    """Learned positions (row E), pre-norm with its final LayerNorm, biased projections, separate vocabularies."""
    model = tiny(positional="learned", norm_first=True, attention_bias=True, shared_vocab=False)
    src = batch([9], seed=4)
    hypotheses_match(beam_search(CompiledDecoding(model, compile_step=False), src, 40, n_best=4)[0],
                     beam_search(model, src, 40, n_best=4)[0])


def test_a_forced_prefix_runs_the_same_through_the_static_step():
    model = tiny()
    src, prefix = batch([5]), torch.tensor([[7, 8, 9]])
    hypotheses_match(beam_search(CompiledDecoding(model, compile_step=False), src, 30, prefix=prefix, n_best=4)[0],
                     beam_search(model, src, 30, prefix=prefix, n_best=4)[0])


def test_only_one_source_takes_the_static_cache():
    model = tiny()
    static = CompiledDecoding(model, compile_step=False)
    assert isinstance(static.start_decoding(batch([4])), StaticCache)
    assert isinstance(static.start_decoding(batch([4, 6])), DecoderCache)  # a batch: eager
    hypotheses = beam_search(static, batch([4, 6, 9]), 30)
    assert [h[0].ids for h in hypotheses] == [h[0].ids for h in beam_search(model, batch([4, 6, 9]), 30)]
    model.decoder_layers[0].self_attn.head_mask = torch.tensor([1.0, 0.0])  # an ablation: eager, as the views
    assert isinstance(static.start_decoding(batch([4])), DecoderCache)
    with pytest.raises(ValueError, match="eager step"):
        static.decode_step(torch.tensor([1]), StaticCache([], []), need_weights=True)


def test_without_a_compiler_the_model_itself_decodes(monkeypatch):
    model = tiny()
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    assert compiled.prepared(model) is model


def test_with_a_compiler_the_model_decodes_compiled():
    model = tiny()
    assert compiled.prepared(model).model is model or not compiled.compiler_available()


def test_compiled_options_are_checked():
    with pytest.raises(ValueError, match="not int8"):
        DecodeOptions(compiled=True, dtype="int8").validate()
    with pytest.raises(ValueError, match="compiled must be True or False"):
        DecodeOptions(compiled="yes").validate()
    assert DecodeOptions(compiled=True).sentences_per_batch == 1


@pytest.mark.skipif(not compiled.compiler_available(), reason="torch.compile's CPU code needs a C++ compiler")
@pytest.mark.slow  # minutes on 2 cores beside the rest: CI skips it, `--runslow` runs it
def test_compiled_translations_are_the_eager_ones():
    """One real compile (greedy and beam of short sentences: a few graphs, seconds each): the same outputs."""
    bundle = tiny_bundle()
    sentences = reverse_sources(4, seed=3)
    for method in ("greedy", "beam"):
        eager = translate_detailed(bundle, sentences, method=method)
        fast = translate_detailed(bundle, sentences, method=method, compiled=True)
        assert [t.text for t in fast] == [t.text for t in eager]
        assert [t.score for t in fast] == pytest.approx([t.score for t in eager], abs=1e-4)
