"""Plotly figures for the studio. Pure functions: numbers and token strings in, figures out.

One module per topic: layout (what every figure shares: look, token labels, the phone layout),
attention (token probabilities and attention maps), beam_tree, model (the positional encoding
and the model's parts), the explaining tabs' what_if, arithmetic and saliency, side_by_side (the
Compare tab's two models and our Table 3 beside the paper's) and bertviz_offline (bertviz's head and
model views as pages that load nothing). The tabs call most of them as ``plots.NAME``, side_by_side
and bertviz_offline by their module; the Train tab's figures are studio/train/plots.py.
"""
from .arithmetic import arithmetic_title, concat_to_output, query_and_keys, weighted_values
from .attention import (attention_grid, attention_head, cross_attention_rows, token_probabilities,
                        token_probabilities_json)
from .beam_tree import CROWDED_STEPS, beam_tree
from .layout import (
                     FONT,
                     NARROW_CHARS,
                     NARROW_FONT,
                     NARROW_PX,
                     TEMPLATE,
                     empty,
                     hover_text,
                     label,
                     narrow,
                     shown,
                     stacked,
                     title_room,
                     word_start_note,
                     wrap,
)
from .model import (
                     label_smoothing,
                     learned_heatmap,
                     learned_similarity,
                     lr_schedule,
                     masks,
                     parameter_shares,
                     pe_curves,
                     pe_heatmap,
                     pe_similarity,
)
from .saliency import agreement_bars, saliency_maps
from .what_if import target_probabilities, token_chips

__all__ = ["CROWDED_STEPS", "FONT", "NARROW_CHARS", "NARROW_FONT", "NARROW_PX", "TEMPLATE",
           "agreement_bars", "arithmetic_title", "attention_grid", "attention_head", "beam_tree", "concat_to_output",
           "cross_attention_rows", "empty", "hover_text", "label", "label_smoothing", "lr_schedule", "masks",
           "learned_heatmap", "learned_similarity", "narrow", "parameter_shares", "pe_curves", "pe_heatmap",
           "pe_similarity", "query_and_keys",
           "saliency_maps", "shown", "stacked", "target_probabilities", "title_room", "token_chips",
           "token_probabilities", "token_probabilities_json", "weighted_values", "word_start_note",
           "wrap"]
