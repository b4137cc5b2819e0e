"""Padded batches packed onto their real tokens (core/model/packing.py) compute what each sentence alone computes."""
from __future__ import annotations

import torch

from tests.helpers.tiny import batch, tiny


def test_sentence_alone_equals_sentence_in_padded_batch():
    model = tiny()
    src_lengths, tgt_lengths = [3, 9, 6], [2, 7, 5]
    src, tgt = batch(src_lengths), batch(tgt_lengths, seed=4)
    together = model(src, tgt)  # padded: the real tokens run packed
    for row, (s, t) in enumerate(zip(src_lengths, tgt_lengths)):
        alone = model(src[row:row + 1, :s], tgt[row:row + 1, :t])  # nothing padded
        torch.testing.assert_close(together[row:row + 1, :t], alone, atol=1e-5, rtol=0)
        assert not together[row, t:].any()  # padded positions: zero logits


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
