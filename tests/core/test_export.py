"""core.export and `train_cli.py export`: the CTranslate2 and transformers (MarianMT) exports of the tiny
reverse model translate as ours does, models the formats cannot carry are refused in one line, and a failed
export leaves nothing behind. Skipped where ctranslate2 / transformers are not installed (the "export" extra)."""
from __future__ import annotations

import pytest
import torch

from core.bundle import ModelBundle
from core.checkpoint import save_checkpoint
from core.data.tokenizer import Tokenizer
from core.export import ExportError, our_outputs
from core.inference.options import DecodeOptions
from core.inference.scoring import score
from core.model.config import ModelConfig
from core.model.transformer import Transformer
from tests.helpers.models import reverse_sources, tiny_bundle


@pytest.fixture(scope="module")
def bundle():
    return tiny_bundle()


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return reverse_sources(12, seed=5)


def variant(**overrides) -> ModelBundle:
    """An untrained model of the reverse task's vocabulary with other settings (its outputs are noise, so it is
    compared by teacher-forced log-probabilities, not translations)."""
    tiny = tiny_bundle()
    letters = Tokenizer.from_json(tiny.tokenizer.to_json())
    config = ModelConfig.from_preset("tiny", src_vocab_size=letters.vocab_size, tgt_vocab_size=letters.vocab_size,
                                     max_len=32, **overrides)
    torch.manual_seed(3)
    model = Transformer(config).eval()
    separate = None if config.shared_vocab else letters
    return ModelBundle(model, letters, separate_target=separate)


# ----- CTranslate2 ---------------------------------------------------------------------------
def test_ctranslate2_export_translates_as_ours(bundle, sentences, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from core.export.ctranslate2 import export_ctranslate2, translate_tokens

    out = export_ctranslate2(bundle, tmp_path / "ct2", sentences[:4])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]  # no temporary folder left
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="float32")
    for method in ("beam", "greedy"):
        options = DecodeOptions(method=method, length_penalty="plain")
        assert translate_tokens(translator, bundle, sentences, options) == our_outputs(bundle, sentences,
                                                                                       method=method)


@pytest.mark.parametrize("overrides", [dict(norm_first=True), dict(positional="learned"),
                                       dict(shared_vocab=False), dict(attention_bias=True)])
def test_ctranslate2_carries_variants(overrides, sentences, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from core.export.ctranslate2 import write_model

    model_bundle = variant(**overrides)
    (tmp_path / "ct2").mkdir()
    write_model(model_bundle, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", compute_type="float32")
    targets = [s[::-1] for s in sentences[:4]]
    theirs = translator.score_batch([model_bundle.tokenizer.tokens(model_bundle.tokenizer.encode(s)) for s in
                                     sentences[:4]],
                                    [model_bundle.tokenizer.tokens(model_bundle.tokenizer.encode(t)) for t in targets])
    ours = score(model_bundle, sentences[:4], targets)
    for mine, their in zip(ours, theirs):
        assert their.log_probs == pytest.approx(mine.token_logprobs, abs=1e-4)


def test_ctranslate2_refuses_what_it_cannot_carry(tmp_path):
    pytest.importorskip("ctranslate2")
    from core.export.ctranslate2 import export_ctranslate2

    with pytest.raises(ExportError, match="cannot carry a key size d_k"):
        export_ctranslate2(variant(d_k=8), tmp_path / "out")
    assert not any(tmp_path.iterdir())


def test_a_failed_check_leaves_nothing(bundle, sentences, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2")
    from core.export import ctranslate2 as exporter

    plain = exporter.transformer_spec

    def unscaled(model):  # a wrong conversion: embeddings not multiplied by sqrt(d_model)
        spec = plain(model)
        spec.encoder.scale_embeddings = spec.decoder.scale_embeddings = False
        return spec

    monkeypatch.setattr(exporter, "transformer_spec", unscaled)
    with pytest.raises(ExportError, match="the CTranslate2 export translates .* not written"):
        exporter.export_ctranslate2(bundle, tmp_path / "ct2", sentences[:4])
    assert not any(tmp_path.iterdir())
    (tmp_path / "taken").mkdir()
    with pytest.raises(ExportError, match="already exists"):
        exporter.export_ctranslate2(bundle, tmp_path / "taken", sentences[:4])


# ----- transformers (MarianMT) ----------------------------------------------------------------
def test_transformers_export_reloads_and_translates_as_ours(bundle, sentences, tmp_path):
    transformers = pytest.importorskip("transformers")
    from core.export.marian import export_marian
    from core.inference.translation import translate_detailed

    out = export_marian(bundle, tmp_path / "hf", sentences[:4])
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= {
        p.name for p in out.iterdir()}
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(out)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out))
    theirs = []
    for text in sentences:  # with the saved generation defaults: beam 4, length penalty 0.6
        with torch.inference_mode():
            ids = model.generate(**tokenizer([text], return_tensors="pt"))
        theirs.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    ours = [t.text for t in translate_detailed(bundle, sentences, method="beam", length_penalty="plain")]
    assert theirs == ours


@pytest.mark.parametrize("overrides, named", [(dict(positional="learned"), "learned positions"),
                                              (dict(norm_first=True), "pre-norm"),
                                              (dict(shared_vocab=False), "separate vocabularies")])
def test_transformers_refuses_what_marian_cannot_carry(overrides, named, tmp_path):
    pytest.importorskip("transformers")
    from core.export.marian import export_marian

    with pytest.raises(ExportError, match=f"MarianMT cannot carry this model's {named}"):
        export_marian(variant(**overrides), tmp_path / "hf")
    assert not any(tmp_path.iterdir())


# ----- the command -----------------------------------------------------------------------------
def test_cli_export(bundle, tmp_path, capsys, monkeypatch):
    import sys

    from cli.main import main

    pytest.importorskip("ctranslate2")
    checkpoint = save_checkpoint(tmp_path / "ckpt", bundle)
    check = tmp_path / "check.txt"
    check.write_text("a b c d\ne f g\n", encoding="utf-8")
    args = ["export", "--format", "ctranslate2", "--checkpoint", str(checkpoint), "--check-input", str(check)]
    assert main(args + [str(tmp_path / "ct2")]) == 0
    assert "checked" in capsys.readouterr().out
    assert main(args + [str(tmp_path / "ct2")]) == 2
    assert "already exists" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed
    assert main(args + [str(tmp_path / "other")]) == 2
    assert "needs the ctranslate2 package: pip install" in capsys.readouterr().err
