# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Attention Is All You Need, on the real thing
#
# Vaswani et al. (2017), section by section, on this repository's library (`core/`) and its shipped models:
# each section's sentence from the paper, then the few lines that show it with real tensors, and an `assert`
# that checks the claim. The figures are the studio's own (`studio.notebook`: one line each). It runs top to
# bottom in a few minutes on a laptop's CPU, a tiny model trained from scratch included.
#
# **Running it.** In a clone: `pip install -e ".[notebook]"`, then open this file in JupyterLab (jupytext opens
# the `.py` as a notebook) or make the `.ipynb` with `jupytext --to ipynb notebooks/attention-is-all-you-need.py`.
# On Colab, the first cell clones and installs the project first.

# %%
# Where the project is: a clone holding this notebook (Jupyter started anywhere inside it), or on Colab a fresh
# clone. Colab cannot know which repository it opened the notebook from, so it reads the repository's git
# address from TRANSFORMER_STUDIO_GIT: set it in the cell above this one with `%env TRANSFORMER_STUDIO_GIT=`
# followed by the address you opened the notebook from (the one `git clone` takes).
import importlib.util
import os
import subprocess
import sys
from pathlib import Path


def repository_root() -> Path | None:
    """The clone this notebook runs in: the folder above the working directory holding core/ and checkpoints/."""
    here = Path.cwd().resolve()
    return next((p for p in (here, *here.parents) if (p / "core").is_dir() and (p / "checkpoints").is_dir()), None)


ROOT = repository_root()
if ROOT is None and importlib.util.find_spec("google.colab") is not None:
    address = os.environ.get("TRANSFORMER_STUDIO_GIT", "")
    if not address:
        raise RuntimeError("On Colab this notebook clones the project: set TRANSFORMER_STUDIO_GIT to its git address "
                           "first (%env TRANSFORMER_STUDIO_GIT=... in a cell above), then run this cell again.")
    ROOT = Path("/content/transformer-studio")
    subprocess.run(["git", "clone", "--depth", "1", address, str(ROOT)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[notebook]"], check=True)
if ROOT is None:
    raise RuntimeError("Run this notebook inside a clone of the repository (its README: Set up).")
os.chdir(ROOT)  # the shipped checkpoints and docs/ are read from here
sys.path.insert(0, str(ROOT))  # an install made by this cell is seen without restarting the kernel

# %%
import math
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm's notebook bars want ipywidgets; plain ones do

import numpy as np
import torch
from IPython.display import display

import core
import studio.notebook as nb
from core.data.batching import pad_ids, source_ids
from core.data.files import load_corpus
from core.explain.hooks import attention_maps
from core.training.loss import smoothed_target_distribution
from core.training.schedule import learning_rate

torch.manual_seed(0)
german = core.load_checkpoint("checkpoints/multi30k-de-en-small")  # Multi30k German→English, 38.4 BLEU
numbers = core.load_checkpoint("checkpoints/numbers-en-de-tiny")  # a lecture task: English numbers → German
config = german.model.config
config

# %% [markdown]
# ## 3.1 Encoder and decoder stacks
#
# > "The encoder maps an input sequence of symbol representations $(x_1, ..., x_n)$ to a sequence of continuous
# > representations $z = (z_1, ..., z_n)$. Given $z$, the decoder then generates an output sequence
# > $(y_1, ..., y_m)$ of symbols one element at a time."
#
# The shipped model is the paper's architecture at a smaller size: N = 3 layers a stack, d_model = 256.

# %%
sentence = "Zwei Hunde spielen im Gras."
translation = core.translate_detailed(german, [sentence], beam_size=4, alpha=0.6)[0]
src = torch.tensor([source_ids(german.tokenizer, sentence)])  # the source's tokens and <eos>
tgt_in = torch.tensor([[config.bos_id, *translation.ids]])  # <bos> and the translation: the decoder's input
with torch.no_grad():
    z = german.model.encode(src)  # (1, n, d_model): one vector per source token
    logits = german.model(src, tgt_in)  # (1, m, V): a distribution over the vocabulary at each output position
print(translation.text, "|", translation.source_tokens)
print("x:", tuple(src.shape), " z:", tuple(z.shape), " logits:", tuple(logits.shape))
assert z.shape == (1, src.shape[1], config.d_model)
assert logits.shape == (1, tgt_in.shape[1], config.tgt_vocab_size)
assert len(german.model.encoder_layers) == len(german.model.decoder_layers) == 3
# "One element at a time": greedy decoding writes the likeliest token given those before it, so the whole output
# read back at once (teacher forcing, the causal mask of 3.2.3) predicts exactly it again.
greedy = core.translate_detailed(german, [sentence], method="greedy")[0]
with torch.no_grad():
    read_back = german.model(src, torch.tensor([[config.bos_id, *greedy.ids]]))
assert read_back[0].argmax(-1).tolist() == [*greedy.ids, config.eos_id]

# %% [markdown]
# ## 3.2.1 Scaled dot-product attention
#
# > "We compute the dot products of the query with all keys, divide each by $\sqrt{d_k}$, and apply a softmax
# > function to obtain the weights on the values."  $\mathrm{Attention}(Q, K, V) = \mathrm{softmax}(QK^T/\sqrt{d_k})V$
#
# One query of one head, by hand: `core.attention_arithmetic` hands out the head's query vector, keys and values
# while the word "dogs" is written; numpy does eq. 1; the layer's own attention weights must agree.

# %%
layer, head, query = 1, 2, 1  # decoder layer 2's cross-attention, head 3; query 1 reads "Two" and predicts "dogs"
a = core.attention_arithmetic(german, sentence, translation.ids, "cross", layer, head, query)
d_k = a.q.shape[0]
scores = a.keys @ a.q / math.sqrt(d_k)
weights = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
head_output = weights @ a.values
layer_weights = attention_maps(german.model, src[0].tolist(), tgt_in[0].tolist())["cross"][layer, head, query]
print(f"d_k = {d_k}; query {a.query_tokens[query]!r} weighs", dict(zip(a.key_tokens, weights.round(3))))
assert d_k == config.d_model // config.n_heads
assert np.allclose(weights, layer_weights.numpy(), atol=1e-5)  # eq. 1 by hand = the layer's weights
assert np.allclose(head_output, a.head_output, atol=1e-5) and math.isclose(weights.sum(), 1.0, rel_tol=1e-6)

# %%
nb.arithmetic(german, sentence, stack="cross", layer=layer, head=head, query=query)

# %% [markdown]
# ## 3.2.2 Multi-head attention
#
# > "Multi-head attention allows the model to jointly attend to information from different representation
# > subspaces at different positions." Every row of every head's map is a distribution over the keys; the
# > heads of a layer look at different things.

# %%
maps = attention_maps(german.model, src[0].tolist(), tgt_in[0].tolist())
for stack, m in maps.items():
    print(f"{stack:8s} (layers, heads, queries, keys) = {tuple(m.shape)}")
    assert torch.allclose(m.sum(-1), torch.ones(m.shape[:-1]), atol=1e-5)  # each query's weights sum to 1
cross = maps["cross"]
assert cross.shape[:2] == (config.decoder_layers, config.n_heads)
assert not torch.allclose(cross[layer, 0], cross[layer, 1], atol=0.05)  # two heads, two ways of looking
nb.attention(german, sentence, stack="cross")

# %% [markdown]
# bertviz's head view of the same maps (every stack; hover a token), offline: `.write_html(path)` saves it.

# %%
nb.head_view(german, sentence)

# %% [markdown]
# ## 3.2.3 Applications of attention in our model: the masks
#
# > "We need to prevent leftward information flow in the decoder to preserve the auto-regressive property. We
# > implement this inside of scaled dot-product attention by masking out (setting to $-\infty$) all values in
# > the input of the softmax which correspond to illegal connections."
#
# Two checks: the decoder's self-attention puts no weight after the query, and changing a later target token
# changes no earlier prediction. Padding is masked too: a sentence padded in a batch reads as it does alone.

# %%
decoder_self = maps["decoder"]  # (layers, heads, m, m)
assert torch.all(decoder_self.triu(diagonal=1) == 0)
changed = tgt_in.clone()
changed[0, -1] = german.tokenizer.encode("Katzen")[0]
with torch.no_grad():
    again = german.model(src, changed)
assert torch.allclose(logits[0, :-1], again[0, :-1], atol=1e-4)  # positions before the change: untouched
assert not torch.allclose(logits[0, -1], again[0, -1], atol=1e-4)

longer = source_ids(german.tokenizer, "Ein Mann fährt mit dem Fahrrad eine Straße entlang.")
batch = pad_ids([src[0].tolist(), longer])  # the short sentence padded to the long one's length
with torch.no_grad():
    in_batch = german.model(batch, torch.cat([tgt_in, tgt_in]))
assert torch.allclose(in_batch[0], logits[0], atol=1e-4)
nb.masks(german)

# %% [markdown]
# ## 3.3 Position-wise feed-forward networks
#
# > "$\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$ ... applied to each position separately and identically."

# %%
ffn = german.model.encoder_layers[0].ffn
x = torch.randn(1, 5, config.d_model)
with torch.no_grad():
    whole = ffn(x)
    by_hand = torch.relu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
    one_at_a_time = torch.cat([ffn(x[:, i:i + 1]) for i in range(5)], dim=1)
print("d_model", config.d_model, "→ d_ff", config.d_ff, "→ d_model")
assert torch.allclose(whole, by_hand, atol=1e-5) and torch.allclose(whole, one_at_a_time, atol=1e-5)

# %% [markdown]
# ## 3.4 Embeddings and softmax
#
# > "We share the same weight matrix between the two embedding layers and the pre-softmax linear
# > transformation ... In the embedding layers, we multiply those weights by $\sqrt{d_{model}}$."
#
# The first encoder layer's input, caught with a hook, is the embedding times √d_model plus the positions.

# %%
model = german.model
assert model.generator.weight is model.tgt_embed.weight and model.src_embed is model.tgt_embed  # one matrix, three uses
caught = {}
hook = model.encoder_layers[0].register_forward_pre_hook(lambda module, args: caught.update(x=args[0]))
with torch.no_grad():
    model.encode(src)
hook.remove()
expected = model.src_embed(src) * math.sqrt(config.d_model) + core.sinusoidal_encoding(src.shape[1], config.d_model)
assert torch.allclose(caught["x"].reshape(expected.shape), expected, atol=1e-5)
nb.parameters(german)

# %% [markdown]
# ## 3.5 Positional encoding
#
# > "$PE_{(pos,2i)} = \sin(pos/10000^{2i/d_{model}})$, $PE_{(pos,2i+1)} = \cos(pos/10000^{2i/d_{model}})$ ...
# > for any fixed offset $k$, $PE_{pos+k}$ can be represented as a linear function of $PE_{pos}$."
#
# The formula written out, and the linear function found: each (sin, cos) pair turns by a rotation that depends
# on k alone.

# %%
d, n = 64, 50
pe = core.sinusoidal_encoding(n, d).double().numpy()
pos, i = np.arange(n)[:, None], np.arange(0, d, 2)[None, :]
assert np.allclose(pe[:, 0::2], np.sin(pos / 10000 ** (i / d)), atol=1e-6)
assert np.allclose(pe[:, 1::2], np.cos(pos / 10000 ** (i / d)), atol=1e-6)
k = 7
rotation, *_ = np.linalg.lstsq(pe[:-k], pe[k:], rcond=None)  # one matrix M with PE[pos + k] = PE[pos] M, for all pos
assert np.allclose(pe[:-k] @ rotation, pe[k:], atol=1e-6)
nb.positional_encoding(d, length=n, part="curves")

# %% [markdown]
# > "Since our model contains no recurrence and no convolution, in order for the model to make use of the order of
# > the sequence, we must inject some information about the relative or absolute position of the tokens."
#
# Take the positions out (`nb.knockout`, on the model itself, restored after) and attention sees a bag of words:
# who chases whom is gone, and a sentence and its words in reverse order translate alike.

# %%
chase = nb.knockout(german, "Zwei Hunde jagen eine Katze.", part="positions")
backwards = nb.knockout(german, "Katze. eine jagen Hunde Zwei", part="positions")
for view in (chase, backwards):
    print(f"{view.numbers['before']!r:45} without positions: {view.numbers['after']!r}")
assert chase.numbers["before"] != backwards.numbers["before"]  # with positions, two different sentences
assert chase.numbers["after"] == backwards.numbers["after"]  # without, one bag of words and one translation
chase

# %%
nb.positional_encoding(d, length=n, part="similarity")

# %% [markdown]
# ## 5.3 Optimizer
#
# > "We used the Adam optimizer with $\beta_1 = 0.9$, $\beta_2 = 0.98$ and $\epsilon = 10^{-9}$. We varied the
# > learning rate over the course of training, according to the formula:
# > $lrate = d_{model}^{-0.5} \cdot \min(step^{-0.5}, step \cdot warmup\_steps^{-1.5})$"

# %%
warmup, steps = 4000, np.arange(1, 20001)
rates = np.array([learning_rate(int(s), schedule="noam", d_model=512, warmup=warmup, factor=1.0, peak_lr=0)
                  for s in steps])
assert np.allclose(rates, 512 ** -0.5 * np.minimum(steps ** -0.5, steps * warmup ** -1.5))
assert steps[rates.argmax()] == warmup  # "increasing the learning rate linearly for the first warmup_steps"
print(f"the paper's base model peaks at {rates.max():.2e}, step {warmup}")
nb.schedule(german)  # the shipped model's own: eq. 3 with warmup 800, 1,600 steps

# %% [markdown]
# ## 5.4 Regularization: label smoothing
#
# > "During training, we employed label smoothing of value $\epsilon_{ls} = 0.1$. This hurts perplexity, as the
# > model learns to be more unsure, but improves accuracy and BLEU score."
#
# The target puts 1 − ε (plus its share of ε) on the reference token and spreads ε over the vocabulary, so a
# well-trained model's probabilities gather near that ceiling, not near 1: the dashed line in the translation's
# token probabilities, and the median over the model's six example sentences.

# %%
eps, vocab = 0.1, config.tgt_vocab_size
target = smoothed_target_distribution(5, vocab, eps)
assert math.isclose(float(target.sum()), 1.0, rel_tol=1e-5) and math.isclose(float(target.max()), 1 - eps + eps / vocab,
                                                                             rel_tol=1e-5)
examples = core.translate_detailed(german, german.info["examples"])
probabilities = np.concatenate([np.exp(t.token_logprobs) for t in examples])
print(f"{len(probabilities)} tokens: median probability {np.median(probabilities):.3f}, highest "
      f"{probabilities.max():.3f}")
assert np.median(probabilities) < 0.95 and probabilities.max() < 0.99  # trained towards 0.90, never sure
display(nb.label_smoothing(german))
nb.translation(german, sentence)

# %% [markdown]
# ## A tiny model, trained here from scratch
#
# The studio's lecture run: the `tiny` preset (2 + 2 layers, d_model 64) on the synthetic `numbers` task, English
# numbers to German number words, whose units come before the tens (`twenty - one` → `ein und zwanzig`), so the
# cross-attention must cross. The figures redraw as it trains; the kernel's stop button stops it after the step
# under way (then `run.save()` keeps what it has). About a minute on a laptop's CPU.

# %%
run = nb.train(max_steps=300, name="notebook-numbers")
last = run.view.evaluations[-1]
print(f"step {last.step}: exact match {last.metrics['exact_match']:.0%} on {len(run.view.evaluations)} evaluations")
assert run.view.state == "finished" and last.metrics["exact_match"] >= 0.9  # it has learnt the task

# %%
nb.curves(run)

# %% [markdown]
# It generalises: the task's test split holds numbers that were in neither its training nor its validation pairs.

# %%
test = load_corpus("synthetic:numbers").test
outputs = core.translate(run.bundle, [source for source, _ in test], method="greedy")
right = sum(output == reference for output, (_, reference) in zip(outputs, test)) / len(test)
print(f"{right:.0%} of {len(test)} unseen numbers right, e.g. {test[0][0]!r} → {outputs[0]!r}")
assert right >= 0.9
nb.attention(run, "ninety - seven", stack="cross", layer=1)

# %% [markdown]
# The shipped numbers model (trained the same way, 800 steps) shows the crossing plainly: writing `ein` its
# cross-attention looks at `one`, writing `zwanzig` at `twenty`.

# %%
pair = nb.sentence_pair(numbers, "twenty - one")
crossing = attention_maps(numbers.model, pair.src, pair.tgt_in)["cross"].mean(1).argmax(-1)  # (layers, queries)
print(pair.source_tokens, "→", pair.tokens, "| each layer's most-attended source token:", crossing.tolist())
assert any(row[0] == 2 and row[2] == 0 for row in crossing.tolist())  # "ein" ← "one", "zwanzig" ← "twenty"
nb.attention(numbers, "twenty - one", stack="cross", layer=1)  # its second layer crosses

# %% [markdown]
# ## 6.1 Machine translation: beam search
#
# > "We used beam search with a beam size of 4 and length penalty $\alpha = 0.6$ ... We set the maximum output
# > length during inference to input length + 50, but terminate early when possible."
#
# The studio steps the same search one token at a time; run to its end, its best hypothesis is the translation.
# The score it ranks by is the log-probability divided by GNMT's length penalty $((5 + |Y|)/6)^\alpha$.

# %%
tree = nb.beam_tree(german, sentence, beam_size=4, alpha=0.6)
best = tree.numbers["hypotheses"][0]
length = len(translation.ids) + 1  # with <eos>
assert tree.numbers["done"] and best["hypothesis"].startswith("finished")
assert math.isclose(translation.score, sum(translation.token_logprobs) / ((5 + length) / 6) ** 0.6, rel_tol=1e-4)
assert math.isclose(float(best["score"]), translation.score, abs_tol=1e-4)
print("beam 4:", translation.text, f"({translation.score:.3f})", "| greedy:", greedy.text)
tree

# %% [markdown]
# ## Table 3: model variations, ours beside the paper's
#
# > "To evaluate the importance of different components of the Transformer, we varied our base model in
# > different ways." Our twelve runs (`bench/table3.py`: the `small` model, 800 steps on Multi30k, read in
# > [docs/table3.md](../docs/table3.md)) change one thing each; perplexity is the column to read at this scale
# > (two seeds of the base differ by 0.22 in it, by 3.6 in BLEU).

# %%
table3 = nb.table3()
runs = {r["name"]: r for r in table3.numbers["runs"]}
ppl = {name: r["dev_perplexity"] for name, r in runs.items()}
noise = abs(ppl["base-seed1"] - ppl["base"])
assert ppl["B-dk16"] > ppl["B-dk32"] > ppl["base"] + noise  # row B: "reducing the attention key size hurts"
assert ppl["C-small"] > ppl["base"] + noise > ppl["C-large"]  # row C: "bigger models are better"
assert ppl["D-nols"] < ppl["base"] - noise  # row D: label smoothing "hurts perplexity"
table3

# %% [markdown]
# ## The whole studio, here
#
# Every tab of `python -m studio` below this cell, on the shipped models and the one just trained (picked):
# translate, step through beam search, open the attention, train another. In Colab it comes with a link.
# `app.close()` stops it.

# %%
app = nb.studio(run)
