"""Center loss (Wen et al. 2016): a class center per class, a parameter of its own module
trained by its own SGD at a large learning rate (0.5), its gradient scaled by 1/lambda by
hand before that step so that the centers move at alpha whatever the loss's weight; the
features and the classifier train with another SGD on cross-entropy + lambda * center
loss, both optimizers after one backward.

argv: "healthy"; bug "no-step" (the centers' optimizer is reset every step but never
stepped: the centers never move).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
D, C, E, LAMBDA, ALPHA = 16, 4, 8, 0.01, 0.5
W = torch.randn(D, C)


class CenterLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(C, E))

    def forward(self, features, labels):
        return ((features - self.centers[labels]) ** 2).sum(1).mean() / 2


features = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, E))
head = nn.Linear(E, C)
center_loss = CenterLoss()
params = list(features.parameters()) + list(head.parameters())
opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4)
center_opt = torch.optim.SGD(center_loss.parameters(), lr=ALPHA)
for _ in range(20):
    x = torch.randn(64, D)
    y = (x @ W).argmax(1)
    f = features(x)
    loss = F.cross_entropy(head(f), y) + LAMBDA * center_loss(f, y)
    opt.zero_grad()
    center_opt.zero_grad()
    loss.backward()
    opt.step()
    for p in center_loss.parameters():
        p.grad.data *= 1.0 / LAMBDA
    if MODE != "no-step":
        center_opt.step()
print("final", loss.item())
