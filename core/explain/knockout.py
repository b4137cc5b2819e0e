"""Why is each part there? Knock it out at inference and see what breaks.

    with knocked_out(bundle, positions=False):        # section 3.5's encodings gone
        core.translate(bundle, ["Zwei Hunde jagen eine Katze."])

Each part the paper adds, and what it says the part is for (``CLAIMS``, one line each, with its section):
the positional encodings (3.5), the 1/sqrt(d_k) scale of eq. 1 (3.2.1), a sub-layer's residual connection and
its LayerNorm (3.1), a whole layer (3.1), chosen heads (3.2.2: core.explain.hooks.heads_off), the decoder's
look-ahead mask (3.2.3) and one source token hidden from cross-attention (3.2.3). ``Knockout`` says what is
knocked out; ``knocked_out`` applies it inside a ``with`` block.

Nothing in core/model knows of this: the parts are knocked out by forward hooks and temporary module swaps made
here, and put back on exit, also on error: the same modules, parameters and buffers bit for bit, no hook left
(tests/core/explain/test_knockout.py). The block changes the model itself, so every caller of that model sees the
knock-out while it lasts: a server knocks parts out of a private copy (the studio's registry.ablation_model).
Decode eagerly inside it: a compiled decoding step (compiled=True) was traced without the hooks.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, fields
from typing import Any, Iterator, Mapping

import torch
from torch import nn

from ..model.config import ModelConfig
from ..model.layers import Residual
from ..model.transformer import Transformer
from .hooks import heads_off

STACKS = ("encoder", "decoder")
SUBLAYERS = {"encoder": ("self", "ffn"), "decoder": ("self", "cross", "ffn")}
SUBLAYER_WORDS = {"self": "self-attention", "cross": "cross-attention", "ffn": "feed-forward network"}
# Each sub-layer's Residual (core/model/layers.py) by its part.
RESIDUALS = {"self": ("res_attn", "res_self"), "cross": (None, "res_cross"), "ffn": ("res_ffn", "res_ffn")}
HEAD_STACKS = ("encoder", "decoder", "cross")


@dataclass(frozen=True)
class Claim:
    """What the paper says a part is for, in one line, and where."""

    section: str
    claim: str

    def __str__(self) -> str:
        return f"{self.section}: {self.claim}"


CLAIMS = {
    "positions": Claim("3.5", "without positions the model cannot tell word order: any reordering of the "
                              "source's tokens gives the same translation"),
    "scale": Claim("3.2.1", "without the 1/√d_k scale, large dot products push the softmax to its edges: "
                            "attention turns nearly one-hot"),
    "residual": Claim("3.1", "the residual connection carries a sub-layer's input past it: without it, "
                             "LayerNorm(Sublayer(x)) forgets what came in"),
    "layernorm": Claim("3.1", "LayerNorm(x + Sublayer(x)) keeps each position's vector at the scale the next "
                              "layer was trained on: without it, the layers above read vectors of another size"),
    "layer": Claim("3.1", "each stack is N identical layers, each refining the one below: without one, the layers "
                          "above read what they never saw"),
    "heads": Claim("3.2.2", "several heads attend to different things at different positions: without a head, "
                            "what only it attended to is lost"),
    "causal_mask": Claim("3.2.3", "the mask keeps each decoder position from seeing later ones: without it, "
                                  "teacher forcing shows each position the words it is to predict, while decoding "
                                  "one token at a time, which has no future to see, writes the same"),
    "hide_source_token": Claim("3.2.3", "every decoder position attends over every source position: a token hidden "
                                        "from cross-attention is not translated, unless the encoder's "
                                        "self-attention carried it into its neighbours"),
}


@dataclass(frozen=True)
class Sublayer:
    """One sub-layer: stack "encoder" or "decoder", layer from 0, part "self", "cross" (decoder) or "ffn"."""

    stack: str
    layer: int
    part: str

    @classmethod
    def of(cls, value: "Sublayer | str") -> "Sublayer":
        """A Sublayer, or one written "decoder.0.cross"."""
        if isinstance(value, Sublayer):
            return value
        stack, layer, part = _split(value, 3, "a sub-layer", "decoder.0.cross")
        sub = cls(stack, layer, part)
        if part not in SUBLAYERS[stack]:
            raise ValueError(f"{value!r}: the {stack}'s sub-layers are {', '.join(SUBLAYERS[stack])}")
        return sub

    def __str__(self) -> str:
        return f"{self.stack}.{self.layer}.{self.part}"

    @property
    def words(self) -> str:
        return f"{self.stack} layer {self.layer + 1}'s {SUBLAYER_WORDS[self.part]}"


@dataclass(frozen=True)
class Layer:
    """One whole layer: stack "encoder" or "decoder", layer from 0."""

    stack: str
    layer: int

    @classmethod
    def of(cls, value: "Layer | str") -> "Layer":
        """A Layer, or one written "encoder.1"."""
        return value if isinstance(value, Layer) else cls(*_split(value, 2, "a layer", "encoder.1"))

    def __str__(self) -> str:
        return f"{self.stack}.{self.layer}"

    @property
    def words(self) -> str:
        return f"{self.stack} layer {self.layer + 1}"


def _split(value: object, parts: int, what: str, example: str) -> tuple:
    pieces = str(value).split(".") if isinstance(value, str) else []
    if len(pieces) != parts or pieces[0] not in STACKS or not pieces[1].isdecimal():
        raise ValueError(f"{what} is written like {example!r} (stack {' or '.join(STACKS)}, layer from 0); "
                         f"got {value!r}")
    return (pieces[0], int(pieces[1]), *pieces[2:])


def _many(value: Any, kind: type) -> tuple:
    """One part or several as a tuple of kind (None or empty: none)."""
    if value is None:
        return ()
    if isinstance(value, (str, kind)):
        value = (value,)
    return tuple(kind.of(v) for v in value)


def _heads(value: Any) -> tuple[tuple[str, int, int], ...]:
    """heads_off's {"cross": {0: [1, 3]}}, or (stack, layer, head) triples, as sorted triples."""
    if not value:
        return ()
    if isinstance(value, Mapping):
        value = [(stack, layer, head) for stack, layers in value.items() for layer, heads in layers.items()
                 for head in heads]
    triples = []
    for triple in value:
        if (not isinstance(triple, (tuple, list)) or len(triple) != 3 or triple[0] not in HEAD_STACKS
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in triple[1:])):
            raise ValueError(f"heads are {{stack: {{layer: [head, ...]}}}} or (stack, layer, head) triples, stack "
                             f"one of {', '.join(HEAD_STACKS)}; got {triple!r}")
        triples.append(tuple(triple))
    return tuple(sorted(set(triples)))


@dataclass(frozen=True)
class Knockout:
    """What is knocked out; the defaults knock nothing out. Layers and heads count from 0.

    positions:   False: no positional encodings, in the encoder or the decoder (3.5)
    scale:       False: eq. 1 without its 1/sqrt(d_k), in every attention (3.2.1)
    residual:    sub-layers ("decoder.0.cross") whose output is LayerNorm(Sublayer(x)), without x + (3.1)
    layernorm:   sub-layers whose LayerNorm is the identity (3.1)
    layer:       whole layers ("encoder.1") whose output is their input (3.1)
    heads:       heads switched off, {"cross": {0: [1, 3]}} or (stack, layer, head) triples (3.2.2)
    causal_mask: False: the decoder's self-attention sees later positions too (3.2.3)
    hide_source_token: a source token (its index, from 0, as the encoder reads the source) that
                 cross-attention may not look at (3.2.3)
    """

    positions: bool = True
    scale: bool = True
    residual: tuple[Sublayer, ...] = ()
    layernorm: tuple[Sublayer, ...] = ()
    layer: tuple[Layer, ...] = ()
    heads: tuple[tuple[str, int, int], ...] = ()
    causal_mask: bool = True
    hide_source_token: int | None = None

    def __post_init__(self) -> None:
        for name in ("positions", "scale", "causal_mask"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True (kept) or False (knocked out); got {getattr(self, name)!r}")
        object.__setattr__(self, "residual", _many(self.residual, Sublayer))
        object.__setattr__(self, "layernorm", _many(self.layernorm, Sublayer))
        object.__setattr__(self, "layer", _many(self.layer, Layer))
        object.__setattr__(self, "heads", _heads(self.heads))
        hidden = self.hide_source_token
        if hidden is not None and (isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 0):
            raise ValueError(f"hide_source_token is a source token's index, from 0; got {hidden!r}")

    @property
    def parts(self) -> list[str]:
        """The names of the parts knocked out (CLAIMS' keys), in the order of the fields."""
        return [f.name for f in fields(self) if getattr(self, f.name) != f.default]

    def check(self, config: ModelConfig) -> None:
        """ValueError naming a layer or head this model does not have."""
        layers = {"encoder": config.encoder_layers, "decoder": config.decoder_layers, "cross": config.decoder_layers}
        for part in (*self.residual, *self.layernorm, *self.layer):
            if not 0 <= part.layer < layers[part.stack]:
                raise ValueError(f"{part}: the {part.stack} has layers 0..{layers[part.stack] - 1}")
        for stack, layer, head in self.heads:
            if not 0 <= layer < layers[stack]:
                raise ValueError(f"{stack} head {layer}.{head}: layers are 0..{layers[stack] - 1}")
            if not 0 <= head < config.n_heads:
                raise ValueError(f"{stack} head {layer}.{head}: heads are 0..{config.n_heads - 1}")

    @property
    def words(self) -> str:
        """What is knocked out, in words ("nothing" for none)."""
        said = {"positions": "the positional encodings", "scale": "the 1/√d_k scale",
                "residual": "the residual connection of " + ", ".join(s.words for s in self.residual),
                "layernorm": "the LayerNorm of " + ", ".join(s.words for s in self.layernorm),
                "layer": ", ".join(layer.words for layer in self.layer),
                "heads": f"{len(self.heads)} head{'s' * (len(self.heads) != 1)} ("
                         + ", ".join(f"{s} L{li + 1} H{h + 1}" for s, li, h in self.heads) + ")",
                "causal_mask": "the decoder's look-ahead mask",
                "hide_source_token": f"source token {self.hide_source_token} from cross-attention"}
        return "; ".join(said[p] for p in self.parts) or "nothing"


@contextlib.contextmanager
def knocked_out(bundle: Any, knockout: Knockout | None = None, **parts: Any) -> Iterator[Knockout]:
    """Inside the block, bundle's model (or a Transformer given as is) runs with the parts knocked out:
    a Knockout, or its fields as keywords (knocked_out(bundle, positions=False, heads={"cross": {0: [1]}})).
    Yields the Knockout. On exit, also on error, the model is exactly as before."""
    model = bundle if isinstance(bundle, Transformer) else getattr(bundle, "model", None)
    if not isinstance(model, Transformer):
        raise TypeError(f"knocked_out takes a ModelBundle or a Transformer, got {type(bundle).__name__}")
    if knockout is not None and parts:
        raise TypeError("knocked_out takes a Knockout or its fields as keywords, not both")
    knockout = knockout if knockout is not None else Knockout(**parts)
    knockout.check(model.config)
    with contextlib.ExitStack() as undo:
        _positions_off(model, knockout, undo)
        _scale_off(model, knockout, undo)
        _residuals_off(model, knockout, undo)
        _layernorms_off(model, knockout, undo)
        _layers_off(model, knockout, undo)
        _causal_mask_off(model, knockout, undo)
        _source_token_hidden(model, knockout, undo)
        if knockout.heads:
            spec: dict[str, dict[int, list[int]]] = {}
            for stack, layer, head in knockout.heads:
                spec.setdefault(stack, {}).setdefault(layer, []).append(head)
            undo.enter_context(heads_off(model, spec))
        yield knockout


def _hook(undo: contextlib.ExitStack, handle: torch.utils.hooks.RemovableHandle) -> None:
    undo.callback(handle.remove)


def _swap(undo: contextlib.ExitStack, owner: nn.Module, name: str, replacement: nn.Module) -> None:
    """owner.name is replacement until undo unwinds; then the original module again (the same object)."""
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    undo.callback(setattr, owner, name, original)


def _positions_off(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    # 3.5 adds the encodings "to the input embeddings at the bottoms of the encoder and decoder stacks": both go.
    if not k.positions:
        _hook(undo, model.positions.register_forward_hook(lambda module, args, out: torch.zeros_like(out)))


def _scale_off(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    """Eq. 1 divides q·k by sqrt(d_k) in the kernel; the queries times sqrt(d_k) cancel it: the plain dot product."""
    if k.scale:
        return
    for layer in (*model.encoder_layers, *model.decoder_layers):
        for attention in (layer.self_attn, getattr(layer, "cross_attn", None)):
            if attention is None:
                continue
            width, factor = attention.widths[0], math.sqrt(attention.d_k)
            projection = attention.q_proj if attention.cross else attention.qkv_proj  # queries first in the fused one
            _hook(undo, projection.register_forward_hook(
                lambda module, args, out, width=width, factor=factor: torch.cat(
                    [out[..., :width] * factor, out[..., width:]], dim=-1)))


def _residual(model: Transformer, sub: Sublayer) -> tuple[nn.Module, str]:
    """The layer holding sub's Residual, and its attribute name."""
    layer = (model.encoder_layers if sub.stack == "encoder" else model.decoder_layers)[sub.layer]
    return layer, RESIDUALS[sub.part][sub.stack == "decoder"]


class _Unconnected(nn.Module):
    """A Residual without its x + : LayerNorm(Dropout(Sublayer(x))), or Dropout(Sublayer(LayerNorm(x))) pre-norm."""

    def __init__(self, residual: Residual):
        super().__init__()
        self.residual = residual

    def forward(self, x: torch.Tensor, sublayer: Any) -> tuple[torch.Tensor, list]:
        r = self.residual
        out, *extras = sublayer(r.norm(x) if r.norm_first else x)
        out = r.dropout(out)
        return (out if r.norm_first else r.norm(out)), extras


def _residuals_off(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    for sub in k.residual:
        layer, name = _residual(model, sub)
        _swap(undo, layer, name, _Unconnected(getattr(layer, name)))


def _layernorms_off(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    for sub in k.layernorm:
        layer, name = _residual(model, sub)
        residual = getattr(layer, name)
        if isinstance(residual, _Unconnected):  # its residual is knocked out too: the norm it wraps
            residual = residual.residual
        _swap(undo, residual, "norm", nn.Identity())


def _layers_off(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    """A layer's output replaced by its input (its first argument); its other outputs (attention, the decoder's
    keys/values for the cache) pass on as computed."""
    for part in k.layer:
        layer = (model.encoder_layers if part.stack == "encoder" else model.decoder_layers)[part.layer]
        _hook(undo, layer.register_forward_hook(lambda module, args, out: (args[0], *out[1:])))


def _causal_mask_off(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    if k.causal_mask:
        return
    def unmasked(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return args, {**kwargs, "causal": False}
    for layer in model.decoder_layers:
        _hook(undo, layer.self_attn.register_forward_pre_hook(unmasked, with_kwargs=True))


def _source_token_hidden(model: Transformer, k: Knockout, undo: contextlib.ExitStack) -> None:
    """The token's key marked as padding in every cross-attention: no decoder position attends to it. A source
    that would have no key left (one token) keeps its own."""
    if k.hide_source_token is None:
        return
    index = k.hide_source_token

    def hidden(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        memory = []
        for group in kwargs.get("memory", ()):
            padding = group.padding
            if index < padding.size(1):
                padding = padding.clone()
                padding[:, index] = True
                padding = torch.where(padding.all(dim=1, keepdim=True), group.padding, padding)
            memory.append(group._replace(padding=padding))
        return args, {**kwargs, "memory": memory}
    for layer in model.decoder_layers:
        _hook(undo, layer.cross_attn.register_forward_pre_hook(hidden, with_kwargs=True))
