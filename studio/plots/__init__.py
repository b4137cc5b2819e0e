"""Plotly figures for the studio. Pure functions: numbers and token strings in, figures out.

One module per topic: layout (what every figure shares: look, token labels, the phone layout),
attention (token probabilities and attention maps), beam_tree, model (the positional encoding
and the model's parts) and training (the Train tab's figures). The tabs call them as ``plots.NAME``.
"""
from .attention import attention_grid, attention_head, cross_attention_rows, token_probabilities
from .beam_tree import CROWDED_STEPS, beam_tree
from .layout import (FONT, NARROW_CHARS, NARROW_FONT, NARROW_PX, TEMPLATE, empty, hover_text, label, narrow, shown,
                     stacked, title_room, word_start_note, wrap)
from .model import label_smoothing, lr_schedule, masks, parameter_shares, pe_curves, pe_heatmap, pe_similarity
from .training import SPEED_WINDOW, training_attention, training_curves

__all__ = ["CROWDED_STEPS", "FONT", "NARROW_CHARS", "NARROW_FONT", "NARROW_PX", "SPEED_WINDOW", "TEMPLATE",
           "attention_grid", "attention_head", "beam_tree", "cross_attention_rows", "empty", "hover_text", "label",
           "label_smoothing", "lr_schedule", "masks", "narrow", "parameter_shares", "pe_curves", "pe_heatmap",
           "pe_similarity", "shown", "stacked", "title_room", "token_probabilities", "training_attention",
           "training_curves", "word_start_note", "wrap"]
