"""A small MLP classifier trained the way a user writes it: blobs in 10 dimensions, four
classes, mini-batches of 32, `zero_grad(); loss.backward(); step()`.

    python mlp.py [--optimizer adam|sgd] [--lr LR] [--steps 100]

Adam at lr 1e-3 or SGD at lr 0.05 with momentum 0.9 (the defaults) both learn it.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


def blobs(n: int = 512, dim: int = 10, classes: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    centres = torch.randn(classes, dim) * 2
    y = torch.randint(classes, (n,))
    return centres[y] + torch.randn(n, dim), y


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    torch.manual_seed(0)

    x, y = blobs()
    model = nn.Sequential(
        nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)
    )
    if args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr or 0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for step in range(args.steps):
        idx = torch.randint(len(x), (32,))
        optimizer.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
