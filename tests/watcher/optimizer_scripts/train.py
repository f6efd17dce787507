"""A healthy training run under a chosen optimizer: `train.py MODEL OPTIMIZER [STEPS]`.

MODEL: lm (a two-block MLP language model on a Markov chain's text) or cnn (a small
convolutional classifier on noisy class templates). OPTIMIZER: a name from
optimizers.SPECS. Prints the first and last loss and whether the weights stayed finite
(the sweep's health check, run without gradscope)."""

from __future__ import annotations

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "optim_vendor"))  # an installed copy first
from optimizers import build  # noqa: E402

V, T, DM = 32, 16, 64


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, DM)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(DM), nn.Linear(DM, 4 * DM), nn.GELU(), nn.Linear(4 * DM, DM))
            for _ in range(2)
        )
        self.ln = nn.LayerNorm(DM)
        self.head = nn.Linear(DM, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        for b in self.blocks:
            h = h + b(h)
        return self.head(self.ln(h)).reshape(-1, V)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.c1(x)), 2)
        h = F.max_pool2d(F.relu(self.c2(h)), 2)
        return self.fc(h.flatten(1))


def lm_data():
    table = torch.distributions.Dirichlet(torch.full((V,), 0.3)).sample((V,))

    def batch(n: int = 32):
        x = torch.zeros(n, T + 1, dtype=torch.long)
        x[:, 0] = torch.randint(0, V, (n,))
        for t in range(T):
            x[:, t + 1] = torch.multinomial(table[x[:, t]], 1).squeeze(1)
        return x[:, :-1], x[:, 1:].reshape(-1)

    return batch


def cnn_data():
    templates = torch.randn(10, 1, 16, 16)

    def batch(n: int = 32):
        y = torch.randint(0, 10, (n,))
        return templates[y] + 0.8 * torch.randn(n, 1, 16, 16), y

    return batch


def main(model_name: str, optimizer_name: str, steps: int) -> tuple[float, float, bool]:
    torch.manual_seed(0)
    model = LM() if model_name == "lm" else CNN()
    batch = lm_data() if model_name == "lm" else cnn_data()
    optimizer, how = build(optimizer_name, model)
    first = last = math.nan
    for step in range(steps):
        model.train()
        if how.train_eval:
            optimizer.train()
        x, y = batch()

        def closure(x=x, y=y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward(create_graph=how.create_graph)
            return loss

        if how.closure:
            loss = optimizer.step(closure)
        else:
            loss = closure()
            optimizer.step()
        value = float(loss.detach())
        first = value if step == 0 else first
        last = value
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    return first, last, finite


if __name__ == "__main__":
    args = sys.argv[1:]
    first, last, finite = main(args[0], args[1], int(args[2]) if len(args) > 2 else 300)
    print(f"loss {first:.3f} -> {last:.3f}, weights finite: {finite}")
