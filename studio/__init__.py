"""Transformer Studio: a Gradio app over ``core`` for lectures (translate, beam search,
attention, positional encodings, the model's parts). ``python -m studio`` starts it.

Importing this package is cheap: Gradio, plotly and bertviz load when the app is built.
"""
