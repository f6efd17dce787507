"""Small models, each with one known gradient pathology (or none).

Every factory is seeded and returns (model, batch, loss_fn) or (model, batch).
"""

from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.nn import functional as F


def _classification(n: int = 32, features: int = 20, classes: int = 5):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    return x, y


def _mlp(*sizes: int, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def healthy_mlp():
    torch.manual_seed(0)
    x, y = _classification()
    return _mlp(20, 64, 64, 5), x, lambda out: F.cross_entropy(out, y)


class WithAuxHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = _mlp(20, 64, 5)
        self.aux_head = nn.Linear(64, 3)  # defined, never called in forward

    def forward(self, x):
        return self.body(x)


def unused_submodule():
    torch.manual_seed(0)
    x, y = _classification()
    return WithAuxHead(), x, lambda out: F.cross_entropy(out, y)


def frozen_layers():
    torch.manual_seed(0)
    x, y = _classification()
    model = nn.Sequential()
    model.add_module("backbone", _mlp(20, 64, 64))
    model.add_module("act", nn.ReLU())
    model.add_module("head", nn.Linear(64, 5))
    model.backbone.requires_grad_(False)
    return model, x, lambda out: F.cross_entropy(out, y)


def vanishing_sigmoid():
    torch.manual_seed(0)
    x, y = _classification()
    return _mlp(20, *[32] * 15, 5, act=nn.Sigmoid), x, lambda out: F.cross_entropy(out, y)


def exploding_deep():
    torch.manual_seed(0)
    x, y = _classification()
    model = _mlp(20, *[64] * 23, 5, act=nn.Identity)
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, nn.Linear):
                nn.init.orthogonal_(layer.weight, gain=2.0)
    return model, x, lambda out: F.cross_entropy(out, y)


class LogOfMasked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 8)

    def forward(self, x):
        h = self.fc(x)
        # log(0) = -inf wherever the mask is off, and its backward gives inf * 0 = NaN
        return torch.log(h * (h > 0))


def nan_loss():
    torch.manual_seed(0)
    x, _ = _classification()
    return LogOfMasked(), x, lambda out: out.mean()


class DetachedMiddle(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = _mlp(20, 64, 32)
        self.decoder = _mlp(32, 64, 5)

    def forward(self, x):
        h = self.encoder(x).detach()  # cuts the graph: the encoder never gets a gradient
        return self.decoder(h)


def detached_middle():
    torch.manual_seed(0)
    x, y = _classification()
    return DetachedMiddle(), x, lambda out: F.cross_entropy(out, y)


def dead_relu():
    torch.manual_seed(0)
    x, y = _classification()
    model = _mlp(20, 64, 64, 5)
    with torch.no_grad():
        layer = model[2]
        assert isinstance(layer, nn.Linear)
        layer.bias.fill_(-100.0)  # every unit of the second layer is off
    return model, x, lambda out: F.cross_entropy(out, y)


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            )

        self.features = nn.Sequential(block(3, 16), block(16, 32), block(32, 64))
        self.classifier = nn.Linear(64 * 4 * 4, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def cnn():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (16,), generator=g)
    return SmallCNN(), x, lambda out: F.cross_entropy(out, y)


class LSTMClassifier(nn.Module):
    def __init__(self, vocab: int = 100, dim: int = 32, classes: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers=2, batch_first=True)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out[:, -1])


def rnn():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 100, (8, 12), generator=g)
    y = torch.randint(0, 4, (8,), generator=g)
    return LSTMClassifier(), tokens, lambda out: F.cross_entropy(out, y)


class CachesOutput(nn.Module):
    """Gathers every output (with its graph) on the module, as logging code often does."""

    def __init__(self):
        super().__init__()
        self.body = _mlp(20, 64, 5)
        self.outputs = []

    def forward(self, x):
        out = self.body(x)
        self.outputs.append(out)  # should be out.detach(): this keeps every step's graph alive
        return out


def retained_graph():
    torch.manual_seed(0)
    x, y = _classification()
    return CachesOutput(), x, lambda out: F.cross_entropy(out, y)
