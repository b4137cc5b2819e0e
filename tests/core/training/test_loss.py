"""The training objective: label smoothing (5.4) on real tokens, computed chunk by chunk,
equals the plain formula on the full logits, in value and in gradient."""
import pytest
import torch

from core import ModelConfig, Transformer
from core.training import loss as loss_module
from core.training.loss import Objective, label_smoothed_loss, projected_loss, smoothed_target_distribution


def test_smoothed_target_distribution_sums_to_one():
    dist = smoothed_target_distribution(3, 10, 0.1)
    assert dist.sum().item() == pytest.approx(1.0)
    assert dist[3].item() == pytest.approx(0.9 + 0.01)


@pytest.mark.parametrize("chunk_rows", [1, 7, 1000])
def test_chunked_loss_equals_plain_loss_and_gradient(monkeypatch, chunk_rows):
    vocab = 300
    monkeypatch.setattr(loss_module, "CHUNK_ELEMENTS", chunk_rows * vocab)
    torch.manual_seed(0)
    hidden = torch.randn(40, 16, requires_grad=True)
    weight = torch.randn(vocab, 16, requires_grad=True)
    target = torch.randint(0, vocab, (40,))
    plain = label_smoothed_loss(hidden @ weight.T, target, 0.1)
    (3 * plain.loss).backward()
    expected = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    chunked = projected_loss(hidden, weight, target, 0.1)
    (3 * chunked.loss).backward()  # the incoming gradient scales what was taken chunk by chunk
    torch.testing.assert_close(chunked.loss, plain.loss)
    torch.testing.assert_close(chunked.nll, plain.nll)
    assert int(chunked.correct) == int(plain.correct)
    torch.testing.assert_close(hidden.grad, expected[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weight.grad, expected[1], atol=1e-5, rtol=1e-4)


def test_objective_equals_loss_of_full_forward():
    """Packing, dropping the padded positions and the chunked loss change nothing."""
    torch.manual_seed(0)
    config = ModelConfig.from_preset("tiny", src_vocab_size=50, tgt_vocab_size=50, max_len=32)
    model = Transformer(config).eval()
    g = torch.Generator().manual_seed(1)

    def padded(lengths):
        ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
        for row, n in enumerate(lengths):
            ids[row, :n] = torch.randint(4, 50, (n,), generator=g)
        return ids

    src, tgt = padded([5, 9, 3]), padded([6, 4, 8])
    tgt[torch.arange(3), torch.tensor([5, 3, 7])] = config.eos_id
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    real = tgt_out.ne(config.pad_id)
    plain = label_smoothed_loss(model(src, tgt_in)[real], tgt_out[real], 0.1)
    plain.loss.backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    loss, nll, correct = Objective(model, 0.1)(src, tgt_in, tgt_out)
    loss.backward()
    torch.testing.assert_close(loss, plain.loss)
    torch.testing.assert_close(nll, plain.nll)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], atol=1e-5, rtol=1e-4, msg=name)
