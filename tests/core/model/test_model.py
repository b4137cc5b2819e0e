"""Issue 2: the model is the paper's, its two attention paths agree, cached decoding
equals the full forward pass, and bad configs fail clearly."""
from __future__ import annotations

import json
import math

import pytest
import torch

from core import ModelConfig, Transformer, sinusoidal_encoding
from core.explain.hooks import attention_maps, attention_modules, heads_off
from core.model.config import PRESETS
from core.model.layers import Residual

V = 40


def tiny(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V, max_len=64, **overrides)
    return Transformer(config).eval()


def batch(lengths: list[int], seed: int = 0) -> torch.Tensor:
    """Right-padded random token ids (ids 4.. are ordinary tokens)."""
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, n in enumerate(lengths):
        out[row, :n] = torch.randint(4, V, (n,), generator=g)
    return out


@pytest.mark.parametrize("pos,i", [(0, 0), (1, 0), (7, 3), (50, 31), (123, 10)])
def test_positional_encoding_matches_formula(pos, i):
    d_model = 64
    pe = sinusoidal_encoding(128, d_model)
    angle = pos / 10000 ** (2 * i / d_model)
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_encoding_needs_an_even_width():
    with pytest.raises(ValueError, match="d_model must be even.*got 7"):
        sinusoidal_encoding(10, 7)


def test_three_way_weight_tying_is_one_tensor():
    model = tiny()
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight


def test_separate_vocabularies_tie_only_decoder_embeddings():
    config = ModelConfig.from_preset("tiny", src_vocab_size=30, tgt_vocab_size=50, shared_vocab=False)
    model = Transformer(config)
    assert model.generator.weight is model.tgt_embed.weight
    assert model.src_embed.weight is not model.tgt_embed.weight
    assert model(batch([5], 1).clamp(max=29), batch([4], 2)).shape == (1, 4, 50)


@pytest.mark.parametrize("norm_first", [False, True])
def test_fast_path_equals_inspect_path(norm_first):
    model = tiny(norm_first=norm_first)
    src, tgt = batch([7, 3, 5]), batch([6, 6, 2], seed=1)
    fast = model(src, tgt)
    inspected, attn = model(src, tgt, return_attention=True)
    torch.testing.assert_close(fast, inspected, atol=1e-5, rtol=0)
    layers, heads = model.config.encoder_layers, model.config.n_heads
    assert [a.shape for a in attn["encoder"]] == [(3, heads, 7, 7)] * layers
    assert [a.shape for a in attn["decoder"]] == [(3, heads, 6, 6)] * model.config.decoder_layers
    assert [a.shape for a in attn["cross"]] == [(3, heads, 6, 7)] * model.config.decoder_layers


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_forward_at_every_step(norm_first):
    model = tiny(norm_first=norm_first)
    src, tgt = batch([9, 4]), batch([8, 8], seed=2)
    full = model(src, tgt).log_softmax(-1)
    cache = model.start_decoding(src)
    for t in range(tgt.size(1)):
        step = model.decode_step(tgt[:, t], cache)
        torch.testing.assert_close(step, full[:, t], atol=1e-4, rtol=0)


@pytest.mark.parametrize("rows", [1, 3, 70])  # 3 rows take the few-rows output projection, 1 and 70 not
def test_decoding_step_equals_full_forward_for_any_number_of_rows(rows):
    model = tiny()
    src, tgt = batch([6, 3] * (rows // 2) + [5] * (rows % 2)), batch([4] * rows, seed=4)
    full = model(src, tgt).log_softmax(-1)
    cache = model.start_decoding(src)
    for t in range(tgt.size(1)):
        torch.testing.assert_close(model.decode_step(tgt[:, t], cache), full[:, t], atol=1e-4, rtol=0)


def test_cache_select_reorders_rows():
    model = tiny()
    src, tgt = batch([5, 6, 7]), batch([4, 4, 4], seed=3)
    cache = model.start_decoding(src)
    for t in range(3):
        model.decode_step(tgt[:, t], cache)
    order = torch.tensor([2, 0])
    reordered = cache.select(order)
    expected = model(src[order], tgt[order]).log_softmax(-1)[:, 3]
    torch.testing.assert_close(model.decode_step(tgt[order, 3], reordered), expected, atol=1e-4, rtol=0)


def test_hypotheses_sharing_one_source_equal_rows_with_their_own_copy():
    # Beam search stores a sentence's encoder keys/values once for its G hypotheses.
    model = tiny()
    src, tgt = batch([5, 7]), batch([4] * 6, seed=6)  # 2 sources, 3 decoder rows each
    shared = model.start_decoding(src)
    own = model.start_decoding(src.repeat_interleave(3, dim=0))
    for t in range(tgt.size(1)):
        got, got_cross = model.decode_step(tgt[:, t], shared, need_weights=True)
        want, want_cross = model.decode_step(tgt[:, t], own, need_weights=True)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        for g, w in zip(got_cross, want_cross):
            torch.testing.assert_close(g, w, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="cannot share 2 sources evenly"):
        model.decode_step(tgt[:3, 0], model.start_decoding(src))


def test_sources_in_groups_equal_one_padded_batch():
    # Decoding encodes sources in groups of similar length, each padded only to its own longest.
    model = tiny()
    src, tgt = batch([3, 2, 9, 7, 8], seed=5), batch([4] * 5, seed=6)
    groups = [src[:2, :3], src[2:]]  # the short sources' group without the long ones' padding
    grouped, whole = model.start_decoding(groups), model.start_decoding(src)
    assert [g.k.size(2) for g in grouped.memory[0]] == [3, 9]
    for t in range(2):
        got, got_cross = model.decode_step(tgt[:, t], grouped, need_weights=True)
        want, want_cross = model.decode_step(tgt[:, t], whole, need_weights=True)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        for g, w in zip(got_cross, want_cross):  # the same probabilities, no weight on the other padding
            torch.testing.assert_close(g[:2, :, :3], w[:2, :, :3], atol=1e-6, rtol=0)
            assert bool((w[:2, :, 3:] == 0).all())
    # Rows 0 and 1 finish: their group goes, the other group's tensors are kept as they are.
    kept = torch.tensor([2, 3, 4])
    untouched = grouped.memory[0][1].k
    grouped, whole = grouped.select(kept), whole.select(kept)
    assert len(grouped.memory[0]) == 1 and grouped.memory[0][0].k is untouched
    torch.testing.assert_close(model.decode_step(tgt[kept, 2], grouped), model.decode_step(tgt[kept, 2], whole),
                               atol=1e-5, rtol=0)
    grouped = grouped.select(torch.tensor([0, 2]))  # a row of the remaining group finishes
    assert grouped.memory[0][0].k.size(0) == 2
    with pytest.raises(ValueError, match="increasing order"):
        model.start_decoding(groups).select(torch.tensor([3, 0]))
    with pytest.raises(IndexError, match="0..4"):  # e.g. rows passed where sources were meant
        model.start_decoding(groups).select(torch.tensor([2, 3, 4, 5]))


def test_hypotheses_of_grouped_sources_follow_their_source_when_others_finish():
    # Beam search over groups: 2 hypotheses per source; the first group's only sentence finishes.
    model = tiny()
    src, tgt = batch([3, 8, 6], seed=7), batch([5] * 6, seed=8)
    rows_src = torch.tensor([0, 0, 1, 1, 2, 2])
    cache = model.start_decoding([src[:1, :3], src[1:]])
    for t in range(2):
        model.decode_step(tgt[:, t], cache)
    kept = torch.tensor([3, 2, 4, 5])  # sentence 0 done; sentence 1's hypotheses swap places
    cache, history = cache.select(kept, torch.tensor([1, 2])), tgt[kept, :2]
    assert [g.sources for g in cache.memory[0]] == [2]
    for t in (2, 3):
        history = torch.cat([history, tgt[kept, t, None]], dim=1)
        expected = model(src[rows_src[kept]], history).log_softmax(-1)[:, -1]
        torch.testing.assert_close(model.decode_step(tgt[kept, t], cache), expected, atol=1e-4, rtol=0)


def test_sentence_alone_equals_sentence_in_padded_batch():
    model = tiny()
    src_lengths, tgt_lengths = [3, 9, 6], [2, 7, 5]
    src, tgt = batch(src_lengths), batch(tgt_lengths, seed=4)
    together = model(src, tgt)  # padded: the real tokens run packed
    for row, (s, t) in enumerate(zip(src_lengths, tgt_lengths)):
        alone = model(src[row:row + 1, :s], tgt[row:row + 1, :t])  # nothing padded
        torch.testing.assert_close(together[row:row + 1, :t], alone, atol=1e-5, rtol=0)
        assert not together[row, t:].any()  # padded positions: zero logits


def test_padding_inside_a_target_is_refused():
    model = tiny()
    tgt = batch([5])
    tgt[0, 2] = 0  # pad between real tokens
    with pytest.raises(ValueError, match="right-padded"):
        model(batch([4]), tgt)


def test_a_left_padded_source_is_refused():
    """Positions count from the first column (3.5): left padding would shift a sentence's positions."""
    model = tiny()
    src = batch([4, 2])
    src[1] = torch.cat([src[1, 2:], src[1, :2]])  # the short row's padding moved to its front
    with pytest.raises(ValueError, match="source must be right-padded"):
        model.encode(src)


def test_a_source_row_of_only_padding_is_refused():
    """Every key of such a row is masked: eq. 1 spelled out gives NaN, the fused kernel does not."""
    model = tiny()
    src = batch([4, 3])
    src[1] = 0
    for need_weights in (False, True):
        with pytest.raises(ValueError, match="all padding"):
            model(src, batch([5, 5]), return_attention=need_weights)


def test_future_target_tokens_never_change_earlier_logits():
    model = tiny()
    src, tgt = batch([6]), batch([8], seed=5)
    changed = tgt.clone()
    changed[0, 5:] = (changed[0, 5:] + 7) % (V - 4) + 4
    torch.testing.assert_close(model(src, tgt)[:, :5], model(src, changed)[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(model(src, tgt)[:, 5:], model(src, changed)[:, 5:])


def test_attention_rows_sum_to_one_and_padding_gets_no_weight():
    model = tiny()
    src, tgt = batch([7, 4]), batch([5, 3], seed=6)
    _, attn = model(src, tgt, return_attention=True)
    for stack in ("encoder", "decoder", "cross"):
        for probs in attn[stack]:
            torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))
    for probs in attn["encoder"] + attn["cross"]:
        assert probs[1, :, :, 4:].abs().max() == 0  # sentence 2 has 4 real source tokens
    for probs in attn["decoder"]:
        assert torch.triu(probs, diagonal=1).abs().max() == 0  # causal: no weight on the future


def test_attention_probabilities_stay_fp32_under_bf16_autocast():
    """The inspect path's softmax runs in fp32 under autocast, as the fused kernel's does: a bf16
    softmax rounds each probability to 8 bits, and its rows no longer sum to one."""
    model = tiny()
    src, tgt = batch([7, 4]), batch([5, 3], seed=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, attn = model(src, tgt, return_attention=True)
    for probs in attn["encoder"] + attn["decoder"] + attn["cross"]:
        assert probs.dtype == torch.float32
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-6, rtol=0)


def test_head_ablation_changes_output_and_switches_back():
    model = tiny()
    src, tgt = batch([6]), batch([5], seed=7)
    before = model(src, tgt)
    with heads_off(model, {"cross": {0: [0, 1, 2, 3]}, "encoder": {1: [2]}}):
        ablated, attn = model(src, tgt, return_attention=True)
        assert not torch.allclose(before, ablated)
        torch.testing.assert_close(model(src, tgt), ablated, atol=1e-5, rtol=0)  # both paths honour it
    torch.testing.assert_close(model(src, tgt), before)
    with pytest.raises(ValueError, match="head"):
        with heads_off(model, {"cross": {0: [9]}}):
            pass


def test_head_ablation_masks_exactly_the_heads_named():
    model = tiny()
    with heads_off(model, {"cross": {0: [0, 1, 2, 3]}, "encoder": {1: [2]}}):
        masks = {stack: [None if m.head_mask is None else m.head_mask.tolist() for m in modules]
                 for stack, modules in attention_modules(model).items()}
    assert masks == {"encoder": [None, [1.0, 1.0, 0.0, 1.0]], "decoder": [None, None],
                     "cross": [[0.0, 0.0, 0.0, 0.0], None]}
    assert all(m.head_mask is None for modules in attention_modules(model).values() for m in modules)


def test_attention_maps_come_in_layer_order():
    """Layer 1's encoder self-attention recomputed from its own projections of the embeddings
    (eq. 1, post-norm: the first layer reads the embeddings as they are)."""
    model = tiny()
    src, tgt = batch([6]), batch([5], seed=7)
    _, attention = model(src, tgt, return_attention=True)
    h, d_k = model.config.n_heads, model.config.d_model // model.config.n_heads
    x = model._embed(src, model.src_embed)
    q, k, _ = (t.view(1, -1, h, d_k).transpose(1, 2)
               for t in model.encoder_layers[0].self_attn.qkv_proj(x).split(model.config.d_model, dim=-1))
    expected = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d_k), dim=-1)
    torch.testing.assert_close(attention["encoder"][0], expected, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(attention["encoder"][1], expected, atol=1e-3)


def test_embeddings_go_through_dropout_in_training():
    """Section 5.4: dropout on the sums of the embeddings and the positional encodings."""
    model = tiny(dropout=0.3).train()
    seen = []
    model.embed_dropout.register_forward_hook(lambda module, inputs, output: seen.append((inputs[0], output)))
    model(batch([30] * 8), batch([30] * 8, seed=3))
    x, out = seen[0]
    dropped = out.eq(0) & x.ne(0)
    assert 0.25 < dropped.float().mean() < 0.35
    torch.testing.assert_close(out[~dropped], x[~dropped] / 0.7)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_connection_and_norm_order(norm_first):
    """Post-norm: LayerNorm(x + Sublayer(x)) (section 3.1); pre-norm: x + Sublayer(LayerNorm(x))."""
    torch.manual_seed(0)
    residual = Residual(16, dropout=0.0, norm_first=norm_first)
    residual.norm.weight.data.uniform_(0.5, 1.5)  # not the identity's ones and zeros
    residual.norm.bias.data.uniform_(-0.5, 0.5)
    x, sublayer = torch.randn(3, 16), torch.nn.Linear(16, 16)
    out, _ = residual(x, lambda h: (sublayer(h),))
    expected = x + sublayer(residual.norm(x)) if norm_first else residual.norm(x + sublayer(x))
    torch.testing.assert_close(out, expected)


def test_residual_dropout_falls_on_the_sublayer_output_before_the_add():
    """Section 5.4: dropout "to the output of each sub-layer, before it is added to the sub-layer input"."""
    torch.manual_seed(0)
    residual = Residual(16, dropout=0.5, norm_first=True).train()
    x, sublayer = torch.randn(64, 16), torch.nn.Linear(16, 16)
    out, _ = residual(x, lambda h: (sublayer(h),))
    added = out - x  # the sub-layer's share: zero where dropped, scaled by 1/(1-p) where kept
    full = sublayer(residual.norm(x)) / 0.5
    kept = added.abs() > 1e-6
    assert 0.4 < kept.float().mean() < 0.6
    torch.testing.assert_close(added[kept], full[kept], atol=1e-5, rtol=1e-4)


def test_pre_norm_stacks_end_with_a_layer_norm():
    model = tiny(norm_first=True)
    with torch.no_grad():
        memory = model.encode(batch([6, 6]))
    # Normalised once more, it stays the same (the norm starts with gain 1 and bias 0).
    torch.testing.assert_close(memory, model.encoder_norm(memory), atol=1e-4, rtol=1e-4)


def test_tiny_model_overfits_sixteen_pairs():
    torch.manual_seed(0)
    config = ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V, dropout=0.0)
    model = Transformer(config)
    src = batch([5, 6, 7, 8] * 4, seed=8)
    # bos + the source reversed: something learnable, right-padded like every real batch
    tgt = torch.nn.utils.rnn.pad_sequence([torch.cat([torch.ones(1, dtype=torch.long), row[row.ne(0)].flip(0)])
                                           for row in src], batch_first=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    for _ in range(300):
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.1:
            break
    assert loss.item() < 0.1


def test_paper_base_has_63_million_parameters():
    """The base model (Table 3 rounds its count to 65M) counted piece by piece: a shared 37k embedding
    (section 3.4), eq. 2's feed-forward layers with their biases, 4 projection matrices per attention
    (3.2.2: no biases), and a layer norm (gain and bias) after each sub-layer; no norm after the stacks
    (section 3.1, post-norm). attention_bias adds fairseq's 4·d_model per attention."""
    config = ModelConfig.from_preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000)
    d, ff, vocab = 512, 2048, 37000
    attention, ffn, norm = 4 * d * d, d * ff + ff + ff * d + d, 2 * d
    encoder_layer, decoder_layer = attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm
    assert Transformer(config).num_parameters() == vocab * d + 6 * encoder_layer + 6 * decoder_layer == 63_045_632
    biased = Transformer(ModelConfig.from_preset("paper-base", src_vocab_size=37000, tgt_vocab_size=37000,
                                                 attention_bias=True))
    assert biased.num_parameters() == 63_045_632 + 18 * 4 * d  # 6 + 2·6 attentions
    assert not any(name.endswith(("proj.bias",)) for name, _ in Transformer(config).named_parameters())


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_and_round_trips_json(name):
    config = ModelConfig.from_preset(name, src_vocab_size=100, tgt_vocab_size=100)
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert PRESETS[name]["d_model"] == config.d_model


def test_encoder_and_decoder_depth_may_differ():
    model = Transformer(ModelConfig.from_preset("tiny", src_vocab_size=V, tgt_vocab_size=V,
                                                encoder_layers=3, decoder_layers=1))
    assert len(model.encoder_layers) == 3 and len(model.decoder_layers) == 1


@pytest.mark.parametrize("overrides,field", [
    (dict(d_model=100, n_heads=3), "n_heads"),
    (dict(d_model=0), "d_model"),
    (dict(d_ff=-1), "d_ff"),
    (dict(encoder_layers=0), "encoder_layers"),
    (dict(dropout=1.5), "dropout"),
    (dict(src_vocab_size=10, tgt_vocab_size=12), "shared_vocab"),
    (dict(dropout="0.1"), "dropout"),  # as a hand-edited config.json might say
    (dict(norm_first="false"), "norm_first"),  # a non-empty string would count as true
    (dict(d_model=64.0), "d_model"),
    (dict(eos_id=5), "eos_id must be 2, the tokenizer's id for <eos>"),  # it would decode with a wrong eos
    (dict(pad_id="0"), "pad_id"),
    (dict(max_len=16_385), "max_len must be at most 16,384"),  # its positional table is allocated whole
])
def test_invalid_configs_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_preset("tiny", **overrides)


def test_a_config_must_be_an_object_of_fields():
    with pytest.raises(ValueError, match="needs an object of fields, got NoneType"):
        ModelConfig.from_dict(None)


def test_unknown_preset_lists_allowed_ones():
    with pytest.raises(ValueError, match="paper-base"):
        ModelConfig.from_preset("gigantic")


def test_unknown_field_is_refused():
    with pytest.raises(ValueError, match="d_modle"):
        ModelConfig.from_dict({"d_modle": 12})


def test_too_long_sequence_raises_clear_error():
    model = tiny()
    with pytest.raises(ValueError, match="max_len"):
        model(batch([65]), batch([3]))
    with pytest.raises(ValueError, match="max_len"):
        model(batch([3]), batch([70]))


@pytest.mark.parametrize("src, tgt_in, message", [
    (batch([3]), torch.tensor([[5, V]]), r"tgt_in holds token ids outside the vocabulary 0..39"),
    (torch.tensor([[5, -1]]), batch([3]), r"source holds token ids outside the vocabulary"),
    (batch([3]), batch([3]).float(), r"tgt_in must hold integer token ids"),
    (batch([3]), batch([3])[0], r"tgt_in must be a \(batch, length\) tensor"),
    (batch([3]), batch([3])[:, :0], r"with at least one token, got shape \(1, 0\)"),
    (batch([3]), batch([3, 3]), r"src and tgt_in must hold the same number of sentences, got 1 and 2"),
])
def test_bad_token_tensors_are_refused_by_name(src, tgt_in, message):
    # They failed inside torch ("index out of range in self", a reshape) or, for a batch-size
    # mismatch, were read as beam hypotheses sharing one source.
    with pytest.raises(ValueError, match=message):
        tiny()(src, tgt_in)


def test_attention_maps_are_the_inspect_paths_for_one_pair_in_eval_mode():
    model = tiny().train()
    src, tgt = batch([6]), batch([4], seed=3)
    maps = attention_maps(model, src[0].tolist(), tgt[0].tolist())
    assert model.training  # its mode is given back
    _, attention = model.eval()(src, tgt, return_attention=True)
    assert {k: tuple(v.shape) for k, v in maps.items()} == {"encoder": (2, 4, 6, 6), "decoder": (2, 4, 4, 4),
                                                           "cross": (2, 4, 4, 6)}
    assert all(torch.equal(maps[k], torch.cat(attention[k])) for k in maps)


def test_cache_reorders_compose_before_the_next_step():
    # Beam search re-ranks each sentence's hypotheses, then drops finished sentences; the cache
    # applies both at once while the next step appends its keys/values.
    model = tiny()
    src, tgt = batch([5, 7]), batch([5] * 6, seed=3)  # 2 sources, 3 hypotheses each
    cache = model.start_decoding(src)
    for t in range(2):
        model.decode_step(tgt[:, t], cache)
    history, sources = tgt[:, :2], torch.tensor([0, 0, 0, 1, 1, 1])
    for order in ([2, 0, 0, 5, 3, 4], [1, 1, 2, 3, 5, 4]):  # within each sentence's rows
        cache.reorder_hypotheses(torch.tensor(order))
        history = history[order]
    kept = torch.tensor([5, 3, 4])  # sentence 0 finished
    cache, history, sources = cache.select(kept, torch.tensor([1])), history[kept], sources[kept]
    for t in (2, 3):
        step = tgt[kept, t]  # any next tokens will do
        history = torch.cat([history, step[:, None]], dim=1)
        expected = model(src[sources], history).log_softmax(-1)[:, -1]
        torch.testing.assert_close(model.decode_step(step, cache), expected, atol=1e-4, rtol=0)


def test_packed_training_gradients_equal_the_padded_batch_gradients():
    # The trainer's objective runs real tokens packed and attention on a zero-padded grid;
    # every parameter's gradient must equal that of the plain loss on the padded logits.
    from core.training.loss import Objective, label_smoothed_loss
    model = tiny()
    src, tgt = batch([3, 9, 6]), batch([5, 8, 2], seed=4)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    loss, _, _ = Objective(model, 0.1)(src, tgt_in, tgt_out)
    loss.backward()
    packed = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    real = tgt_out.ne(0)
    label_smoothed_loss(model(src, tgt_in)[real], tgt_out[real], 0.1).loss.backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(packed[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
