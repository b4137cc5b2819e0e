"""Section 5.1's data: tokenizers, corpora and their files, Hugging Face datasets, synthetic tasks, batches."""
