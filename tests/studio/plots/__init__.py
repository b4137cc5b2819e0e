"""The figures (studio/plots/): what they draw, and that a phone and a projector can read them."""
