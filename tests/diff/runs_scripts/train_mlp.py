"""A small real training loop whose runs differ by one setting at a time, for the diff of
two `watch --log` runs: the learning rate (from a given step on), the seed (the
initialisation), the data order, a frozen layer, a `module.`-prefixed (DDP-named) model.

python train_mlp.py --steps 60 [--lr X] [--lr-from STEP:X] [--seed N] [--data-seed N]
                    [--freeze INDEX] [--wrap]
"""

import argparse

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--lr-from", default=None, help="STEP:LR, the learning rate from that step")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--data-seed", type=int, default=0)
parser.add_argument("--freeze", type=int, default=None, help="index of a Linear to freeze")
parser.add_argument("--wrap", action="store_true", help="hold the model as `module` (DDP names)")
args = parser.parse_args()

torch.manual_seed(1234)  # the data set is the same in every run
features, classes = 16, 4
centers = torch.randn(classes, features)
labels = torch.randint(0, classes, (1024,))
inputs = centers[labels] + 1.2 * torch.randn(1024, features)

torch.manual_seed(args.seed)
model = nn.Sequential(
    nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, classes)
)
if args.freeze is not None:
    model[args.freeze].requires_grad_(False)
if args.wrap:
    holder = nn.Module()
    holder.module = model
    model = holder.module
    params = holder.parameters()
else:
    params = model.parameters()
optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9)
switch = None
if args.lr_from:
    at, lr = args.lr_from.split(":")
    switch = (int(at), float(lr))

order = torch.Generator().manual_seed(args.data_seed)
for step in range(1, args.steps + 1):
    if switch is not None and step == switch[0]:
        for group in optimizer.param_groups:
            group["lr"] = switch[1]
    batch = torch.randint(0, len(inputs), (32,), generator=order)
    loss = F.cross_entropy(model(inputs[batch]), labels[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
