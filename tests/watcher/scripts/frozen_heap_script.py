"""A script that calls gc.freeze() once its model and optimizer are built (a known way to
spare a long run the collector's passes over them): the model global, local to main(),
or held by a trainer object; clipped or not. Its `unused` layer never gets a gradient."""

import gc
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
        self.unused = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Trainer:
    def __init__(self) -> None:
        self.model = Net()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)


def train(model: nn.Module, opt: torch.optim.Optimizer, clip: bool) -> None:
    for _ in range(6):
        x = torch.randn(16, 8)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()


def main(where: str, clip: bool) -> None:
    trainer = Trainer()
    if where == "local":
        model, opt = trainer.model, trainer.optimizer
        del trainer
        gc.freeze()
        train(model, opt, clip)
    else:  # the trainer alone holds them
        gc.freeze()
        train_from(trainer, clip)


def train_from(trainer: Trainer, clip: bool) -> None:
    train(trainer.model, trainer.optimizer, clip)


torch.manual_seed(0)
WHERE, CLIP = sys.argv[1], sys.argv[2:] == ["clip"]
if WHERE == "global":
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gc.freeze()
    train(model, opt, CLIP)
else:
    main(WHERE, CLIP)
