"""Section 6.1's decoding: greedy, beam, sampling, prefixes, precision paths, translation, scoring."""
