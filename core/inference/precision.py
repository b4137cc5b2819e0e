"""Inference at lower precision: the model of sections 3.1-3.4 with cheaper arithmetic. Not in the paper
(its models ran in fp32 on GPUs); what a CPU user picks to translate faster for a little accuracy.

- "fp32": the model as trained, exact (the default);
- "int8": PyTorch's dynamic quantization of every linear layer (the projections W^Q, W^K, W^V, W^O of 3.2.2,
  the FFN of 3.3, the pre-softmax layer of 3.4): int8 weights per output channel, each activation row
  quantized on the fly; embeddings, LayerNorm and attention stay fp32. CPU only;
- "bf16": every weight in bfloat16 (attention's softmax and the output log-probabilities stay fp32);
  fast where the CPU multiplies bfloat16 natively (AVX512-BF16 or AMX), or on a GPU that does.

The prepared copy is kept per model and rebuilt only when the model's weights change (training) or it moves.
"""
from __future__ import annotations

import copy
import warnings
import weakref

import torch
from torch import nn

from ..model.transformer import Transformer
from .options import DTYPES

DESCRIPTIONS = {"fp32": "fp32 (exact)", "int8": "int8 dynamic quantization of the linear layers",
                "bf16": "bfloat16 weights"}
# model -> {dtype: (fingerprint of the fp32 weights it was built from, prepared copy)}
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def supported_dtypes(device: torch.device | str = "cpu") -> list[str]:
    """The precisions that run fast on device: fp32 always; int8 on a CPU with a quantized engine (fbgemm/x86);
    bf16 where bfloat16 products are native (AVX512-BF16/AMX through oneDNN, or a GPU that has them)."""
    device = torch.device(device)
    found = ["fp32"]
    if device.type == "cpu" and set(torch.backends.quantized.supported_engines) & {"x86", "fbgemm", "qnnpack"}:
        found.append("int8")
    if (torch.cuda.is_bf16_supported() if device.type == "cuda" else _cpu_bf16()):
        found.append("bf16")
    return found


def _cpu_bf16() -> bool:
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check()) if check is not None else False


def check_dtype(dtype: str, device: torch.device) -> None:
    """ValueError in one line for a precision that is unknown, or that cannot run on device."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    if dtype == "int8" and device.type != "cpu":
        raise ValueError(f"dtype int8 (dynamic quantization) runs on the CPU only, not on {device}; use bf16 or fp32")


def prepared(model: Transformer, dtype: str) -> Transformer:
    """model itself for fp32, else its copy at that precision (built once, until model's weights change)."""
    device = next(model.parameters()).device
    check_dtype(dtype, device)
    if dtype == "fp32":
        return model
    # An optimizer step bumps each parameter's version; moving the model changes its device.
    fingerprint = (str(device), tuple((p.data_ptr(), p._version) for p in model.parameters()))
    built = _PREPARED.setdefault(model, {})
    if dtype not in built or built[dtype][0] != fingerprint:
        built[dtype] = (fingerprint, _build(model, dtype))
    return built[dtype][1]


def _build(model: Transformer, dtype: str) -> Transformer:
    fast = copy.deepcopy(model).eval()
    if dtype == "bf16":
        return fast.to(torch.bfloat16)
    with warnings.catch_warnings():  # torch.ao.quantization says it moves to torchao; it still works here
        warnings.simplefilter("ignore")
        # One scale per output row of each weight, as CTranslate2's int8 has: one per matrix cost 0.4 BLEU
        # on the shipped model's test_2016 (beam 4), where per row costs about 0.1.
        per_row = torch.ao.quantization.per_channel_dynamic_qconfig
        return torch.ao.quantization.quantize_dynamic(fast, {nn.Linear: per_row}, dtype=torch.qint8, inplace=True)
