"""core.inference.precision: translate's int8 and bf16 paths agree with fp32 on most sentences of the tiny model,
fp32 is the model itself (exact), the prepared copy is cached until the weights change, bad dtypes are
refused in one line; the CLI's --dtype."""
from __future__ import annotations

import pytest
import torch

from core.inference import precision
from core.inference.options import DecodeOptions
from core.inference.translation import translate_detailed
from tests.helpers.models import reverse_sources, tiny_bundle


@pytest.fixture(scope="module")
def bundle():
    return tiny_bundle()


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return reverse_sources(40, seed=11)


def test_fp32_is_the_model_itself(bundle):
    assert precision.prepared(bundle.model, "fp32") is bundle.model
    assert "fp32" in precision.supported_dtypes("cpu")


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
@pytest.mark.parametrize("method", ["beam", "greedy"])
def test_fast_paths_mostly_agree_with_fp32(bundle, sentences, dtype, method):
    exact = translate_detailed(bundle, sentences, method=method)
    fast = translate_detailed(bundle, sentences, method=method, dtype=dtype)
    same = sum(a.text == b.text for a, b in zip(exact, fast))
    assert same >= 0.8 * len(sentences), f"{dtype} {method}: only {same}/{len(sentences)} outputs equal fp32's"


def test_default_stays_fp32(bundle, sentences):
    assert DecodeOptions().dtype == "fp32"
    plain = translate_detailed(bundle, sentences[:5], method="beam")
    explicit = translate_detailed(bundle, sentences[:5], method="beam", dtype="fp32")
    assert [t.token_logprobs for t in plain] == [t.token_logprobs for t in explicit]


def test_prepared_copy_is_cached_until_weights_change():
    model = tiny_bundle().model
    first = precision.prepared(model, "int8")
    assert precision.prepared(model, "int8") is first
    copy = type(model)(model.config)
    copy.load_state_dict(model.state_dict())
    before = precision.prepared(copy, "bf16")
    with torch.no_grad():
        copy.generator.weight.mul_(1.0)  # an in-place update, as an optimizer step makes
    assert precision.prepared(copy, "bf16") is not before


def test_bad_dtype_refused_in_one_line(bundle):
    with pytest.raises(ValueError, match="dtype must be one of fp32, int8, bf16; got 'fp16'"):
        translate_detailed(bundle, ["a b c"], dtype="fp16")
    with pytest.raises(ValueError, match="CPU only"):
        precision.check_dtype("int8", torch.device("cuda"))


def test_cli_dtype_option(tmp_path, capsys):
    from cli.args import decode_options, parse_arguments

    args = parse_arguments(["translate", "--dtype", "int8", "a b c"])
    assert decode_options(args).dtype == "int8"
    with pytest.raises(SystemExit):
        parse_arguments(["evaluate", "--dtype", "fp8"])
    assert "invalid choice" in capsys.readouterr().err


def test_cli_translate_and_evaluate_with_int8(bundle, tmp_path, capsys):
    from cli.main import main
    from core.checkpoint import save_checkpoint

    checkpoint = str(save_checkpoint(tmp_path / "ckpt", bundle))
    assert main(["translate", "--checkpoint", checkpoint, "--dtype", "int8", "--method", "greedy", "a b c d"]) == 0
    assert capsys.readouterr().out.strip() == "d c b a"
    sources, references = tmp_path / "src.txt", tmp_path / "ref.txt"
    sources.write_text("a b c d\ne f g\n", encoding="utf-8")
    references.write_text("d c b a\ng f e\n", encoding="utf-8")
    assert main(["evaluate", "--checkpoint", checkpoint, "--dtype", "int8", "--source-file", str(sources),
                 "--reference-file", str(references)]) == 0
    assert "beam 4, int8" in capsys.readouterr().out
