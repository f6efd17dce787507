"""Real architectures end to end: gradscope's numbers equal plain autograd's, no false alarms."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope
from gradscope.examples.models import SmallCNN
from gradscope.examples.transformer import GPTConfig, make_gpt
from gradscope.inspector.probe import call_model, pick_loss

pytestmark = pytest.mark.slow  # real architectures, end to end


def oracle(model, batch, loss_fn=None):
    model.zero_grad(set_to_none=True)
    with torch.random.fork_rng():
        loss, _ = pick_loss(call_model(model, batch), loss_fn)
        loss.backward()
    norms = {
        n: None if p.grad is None else p.grad.double().norm().item()
        for n, p in model.named_parameters()
    }
    model.zero_grad(set_to_none=True)
    return norms


def check(model, batch, loss_fn=None):
    expected = oracle(model, batch, loss_fn)
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    report = gradscope.inspect(model, batch, loss_fn)
    for n, b in model.named_buffers():
        assert torch.equal(b, buffers[n]), f"buffer {n} changed"
    got = {p.name: p.grad_norm for p in report.stats.params}
    assert got.keys() == expected.keys()
    for name, norm in expected.items():
        assert got[name] == pytest.approx(norm, rel=1e-4, abs=1e-12), name
    return report


def test_gpt_with_dropout_and_tied_weights():
    model, batch = make_gpt(GPTConfig(layers=4, dim=64, dropout=0.1))
    report = check(model, batch)
    assert report.stats.loss_source == "output.loss"
    assert report.findings == []
    assert "lm_head.weight" not in {p.name for p in report.stats.params}  # tied to tok_emb


def test_torch_transformer_encoder_classifier():
    torch.manual_seed(0)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(32, 3)

        def forward(self, x):
            return self.head(self.encoder(x).mean(1))

    x, y = torch.randn(4, 10, 32), torch.tensor([0, 1, 2, 1])
    report = check(Encoder(), x, lambda out: F.cross_entropy(out, y))
    assert [f for f in report.findings if f.severity >= gradscope.Severity.WARNING] == []


def test_cnn_with_batchnorm_and_inplace_relu():
    torch.manual_seed(0)
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    report = check(SmallCNN(), x, lambda out: F.cross_entropy(out, y))
    assert report.findings == []


def test_residual_cnn_block():
    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)), inplace=True)
            out = self.bn2(self.conv2(out))
            out += x  # in-place residual add, as in torchvision's ResNet
            return F.relu(out, inplace=True)

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        Residual(8),
        Residual(8),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )
    x, y = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
    report = check(model, x, lambda out: F.cross_entropy(out, y))
    assert report.findings == []


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_nets(cell):
    torch.manual_seed(0)

    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = cell(8, 16, num_layers=2, batch_first=True)
            self.head = nn.Linear(16, 2)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    x, y = torch.randn(4, 20, 8), torch.tensor([0, 1, 1, 0])
    report = check(Seq(), x, lambda out: F.cross_entropy(out, y))
    assert not any(f.severity >= gradscope.Severity.ERROR for f in report.findings)


def test_long_tanh_rnn_vanishes_over_time():
    """A plain tanh RNN over 200 steps: the classic vanishing-gradient case, found by depth."""
    torch.manual_seed(0)

    class Unrolled(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(4, 32)
            self.cells = nn.ModuleList(nn.Linear(32, 32) for _ in range(30))
            self.head = nn.Linear(32, 2)

        def forward(self, x):
            h = torch.tanh(self.inp(x))
            for cell in self.cells:
                h = torch.tanh(cell(h) * 0.3)
            return self.head(h)

    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    report = check(Unrolled(), x, lambda out: F.cross_entropy(out, y))
    assert "vanishing" in {f.slug for f in report.findings}
    assert any("tanh" in e for f in report.findings for e in f.evidence)
