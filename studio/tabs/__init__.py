"""One module per tab: pure callbacks plus a build() that lays out and wires the components."""
