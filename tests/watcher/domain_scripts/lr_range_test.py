"""An lr range test (fastai's lr_find, torch-lr-finder) and the training it chooses a rate
for: the rate grows by one factor a step until the smoothed loss blows up, the saved model
and optimizer states are loaded back, and training runs at a tenth of the rate of the
lowest loss under a one-cycle schedule. argv[1]: `sgd` (SGD with momentum), `adam`
(Adam), `linear` (Adam, torch-lr-finder's linear step mode: it blows up within a few
steps), `refit` and `fresh` (Adam, as Lightning's Tuner.lr_find then Trainer.fit: the
finder loads its saved weights back and fit builds a new optimizer from
configure_optimizers, lightning/pytorch/tuner/lr_finder.py; `fresh` trains a new model, as
pytorch-forecasting's tutorials build one from_dataset at the chosen rate); bug
`norestore` (SGD, the states saved before the sweep are never loaded back: training
starts from the blown-up weights), `fresh-norestore` (a new optimizer on the swept
weights)."""

import copy
import math
import sys

import torch
from torch import nn
from torch.nn import functional as F

MODE = sys.argv[1] if len(sys.argv) > 1 else "sgd"
torch.manual_seed(0)
X = torch.randn(256, 8)
Y = (X @ torch.randn(8, 4)).argmax(1)


def network():
    hidden = (nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
    return nn.Sequential(*hidden, nn.Linear(32, 4))


model = network()
if MODE in ("adam", "linear", "refit", "fresh"):
    opt = torch.optim.Adam(model.parameters(), lr=1e-6)
else:
    opt = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)
saved = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
start = opt.param_groups[0]["lr"]
factor = (10.0 / start) ** (1 / 40)


def rate(i):
    """The sweep's rate at step i, as a multiple of the first."""
    return 1 + (10.0 / start - 1) * i / 40 if MODE == "linear" else factor**i


sweep = torch.optim.lr_scheduler.LambdaLR(opt, rate)


def batch(i):
    index = torch.arange(i * 32, i * 32 + 32) % len(X)
    return X[index], Y[index]


losses, smooth = [], 0.0
for i in range(40):
    x, y = batch(i)
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    sweep.step()
    smooth = 0.9 * smooth + 0.1 * loss.item()
    losses.append((smooth / (1 - 0.9 ** (i + 1)), start * rate(i)))
    if not math.isfinite(smooth) or losses[-1][0] > 4 * min(v for v, _ in losses):
        break
chosen = min(losses)[1] / 10
if MODE in ("refit", "fresh", "fresh-norestore"):
    if MODE == "refit":
        model.load_state_dict(saved[0])
    elif MODE == "fresh":
        model = network()
    opt = torch.optim.Adam(model.parameters(), lr=chosen)
elif MODE != "norestore":
    model.load_state_dict(saved[0])
    opt.load_state_dict(saved[1])
cycle = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=chosen, total_steps=24)
for i in range(24):
    x, y = batch(i)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    cycle.step()
