# Healthy runs whose objective reaches exactly 0 or cancels a bias, and two bugs that look alike:
#   triplet   a triplet margin loss that every batch meets by step ~13 (loss and gradients 0)
#   siamese   a contrastive margin loss on the distance of a shared net's two outputs
#   rank      a pairwise ranking loss on the difference of a shared scorer's two outputs
#   svm       a multi-class hinge (MultiMarginLoss) under SGD
#   cut       bug: a head whose output the loss never uses (its weight and bias get None)
#   round     bug: a layer's output rounded before the loss (its weight and bias get zeros)
# ARGS: MODE [STEPS]
import sys

import torch
from torch import nn

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
torch.manual_seed(0)
D, C = 24, 8
centers = torch.randn(C, D) * (2.0 if mode == "triplet" else 1.0)
net = nn.Sequential(nn.Linear(D, 48), nn.ReLU(), nn.Linear(48, 8))
aux = nn.Linear(8, 1)
params = [*net.parameters(), *(aux.parameters() if mode in ("cut", "round") else ())]
if mode in ("triplet", "svm"):
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
else:
    opt = torch.optim.Adam(params, lr=3e-3)


def batch(n=64):
    a = torch.randint(0, C, (n,))
    return a, centers[a] + 0.7 * torch.randn(n, D)


for _ in range(steps):
    a, xa = batch()
    if mode == "triplet":
        other = (a + torch.randint(1, C, a.shape)) % C
        xp = centers[a] + torch.randn_like(xa)
        xn = centers[other] + torch.randn_like(xa)
        loss = nn.functional.triplet_margin_loss(net(xa), net(xp), net(xn), margin=1.0)
    elif mode == "siamese":
        same = torch.rand(64) < 0.5
        b = torch.where(same, a, (a + torch.randint(1, C, a.shape)) % C)
        d = (net(xa) - net(centers[b] + 0.7 * torch.randn_like(xa))).norm(dim=1)
        loss = torch.where(same, d.pow(2), torch.relu(2.0 - d).pow(2)).mean()
    elif mode == "rank":
        b, xb = batch()
        y = torch.sign(a - b).float()
        keep = y != 0
        score_a, score_b = net(xa)[:, 0], net(xb)[:, 0]
        loss = nn.functional.margin_ranking_loss(score_a[keep], score_b[keep], y[keep], margin=0.5)
    elif mode == "svm":
        loss = nn.functional.multi_margin_loss(net(xa), a)
    elif mode == "cut":
        out = net(xa)
        aux(out)  # computed, never added to the loss
        loss = nn.functional.cross_entropy(out, a)
    else:  # round
        out = net(xa)
        loss = nn.functional.cross_entropy(out, a) + aux(out).round().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
