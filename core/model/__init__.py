"""Section 3: the model (config, positions, attention, layers, the Transformer, its cache)."""
