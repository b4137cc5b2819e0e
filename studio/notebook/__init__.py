"""The studio in a notebook: every view one line away, a run trained and watched in a cell, the whole studio on
demand. Importing it starts no server and loads no Gradio.

    import studio.notebook as nb
    model = "checkpoints/multi30k-de-en-small"          # or a bundle, a run folder, or nb.train(...)'s run
    nb.translation(model, "Zwei Hunde spielen im Gras.")  # token probabilities; .numbers["n_best"]
    nb.attention(model, "Zwei Hunde spielen im Gras.", stack="cross", layer=2, head=0)
    nb.head_view(model, "Zwei Hunde spielen im Gras.")    # bertviz, offline; nb.model_view(...) too
    nb.arithmetic(model, "Zwei Hunde spielen im Gras.", stack="cross", layer=0, head=0, query=1)
    nb.beam_tree(model, "Zwei Hunde spielen im Gras.", beam_size=4)
    nb.saliency(model, "Zwei Hunde spielen im Gras.", method="integrated_gradients")
    nb.knockout(model, "Zwei Hunde jagen eine Katze.", part="positions")   # 3.5's claim, before and after
    nb.logit_lens(model, "Zwei Hunde spielen im Gras."); nb.why_not(model, "Zwei Hunde spielen im Gras.", position=1)
    nb.free_running(model, "Zwei Hunde spielen im Gras.", "Two dogs are playing in the grass.")
    nb.positional_encoding(512)                          # part="curves", "similarity"
    nb.parameters(model); nb.schedule(model); nb.label_smoothing(model); nb.masks(model)
    nb.curves("runs/m30k-small"); nb.table3()
    run = nb.train(max_steps=300)                        # the Train tab's lecture run, live; the stop button stops it
    nb.studio(run)                                       # the whole studio, inline, with the run's model

Each view is a ``View``: shown when it is a cell's value; ``.figure`` (plotly), ``.write_html(path)``,
``.write_image(path)``, ``.numbers`` (the studio's JSON for it), ``.table()`` (the Download menu's numbers as a
DataFrame). bertviz's views are a ``Page`` (``.write_html(path)``: one file that works offline).
"""
from .inline import studio
from .inside import free_running, knockout, logit_lens, why_not
from .model_parts import (label_smoothing, learned_positions, masks, parameters, positional_encoding, schedule,
                          table3)
from .models import bundle_of
from .runs import Run, curves, train
from .sentence import arithmetic, attention, beam_tree, head_view, model_view, saliency, sentence_pair, translation
from .view import Page, View

__all__ = ["Page", "Run", "View", "arithmetic", "attention", "beam_tree", "bundle_of", "curves", "free_running",
           "head_view", "knockout", "label_smoothing", "learned_positions", "logit_lens", "masks", "model_view",
           "parameters", "positional_encoding", "saliency", "schedule", "sentence_pair", "studio", "table3", "train",
           "translation", "why_not"]
