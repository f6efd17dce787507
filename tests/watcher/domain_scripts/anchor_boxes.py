"""Box regression as RetinaNet does it: smooth-L1 summed over the matched anchors' 4
deltas and divided by the batch's number of positive anchors (which varies per batch),
under SGD with momentum at a learning rate far too high for it. Modes: `positives` (the sum
divided by each batch's positives: the lr is the cause); bug `batch-sum` (the sum left
undivided: the reduction scales the step)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "positives"
A = 64

net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
for _ in range(12):
    feats = torch.randn(A, 8)
    pos = torch.rand(A) < 0.1 + 0.3 * torch.rand(())  # matched anchors: a count per batch
    pos[0] = True
    deltas = feats[:, :4] * 0.5
    loss = F.smooth_l1_loss(net(feats)[pos], deltas[pos], beta=1 / 9, reduction="sum")
    if MODE == "positives":
        loss = loss / int(pos.sum())
    opt.zero_grad()
    loss.backward()
    opt.step()
