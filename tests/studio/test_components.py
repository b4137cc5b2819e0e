"""Components with the studio's manners (studio/components.py): a slider clamps what is typed; the Attention
tab's sliders follow the picked model."""
from __future__ import annotations

import gradio as gr

from studio.components import Slider
from studio.tabs import attention


def test_sliders_clamp_typed_values_and_attention_ranges_follow_the_picked_model(registry):
    layer = Slider(1, 3, value=1, step=1)
    assert (layer.preprocess(6), layer.preprocess(-2), layer.preprocess(2), layer.preprocess(None)) == (3, 1, 2, 1)
    # A cleared box draws what the box shows once it loses focus: the minimum, not the default
    assert Slider(8, 512, value=128, step=2).preprocess(None) == 8
    bundle = registry.get("studio-tiny")
    c = bundle.model.config
    layers, heads = attention.picked_model_ranges(registry, "studio-tiny")  # before any sentence is analysed
    assert layers.maximum == max(c.encoder_layers, c.decoder_layers, 2) and heads.maximum == max(c.n_heads, 2)
    assert attention.picked_model_ranges(registry, "no such model") == (gr.skip(), gr.skip())
    # Layer 6, head 8 shown, then a smaller model picked: the boxes come down to what is drawn.
    layers, heads = attention.picked_model_ranges(registry, "studio-tiny", 6, 8)
    assert (layers.value, heads.value) == (layers.maximum, heads.maximum)
