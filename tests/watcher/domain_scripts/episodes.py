"""Few-shot prototypical networks (Snell et al. 2017): each episode draws N classes of
many and K support and Q query samples of each; the prototypes are the support's class
means and the logits the query's negative squared distances to them. The query's labels
are the classes' places in the episode, arange(N).repeat_interleave(Q): the same tensor
in every episode while its classes and samples are new.

argv: "blocks" (labels in blocks), "turns" (arange(N).repeat(Q)); "one-episode" (the
episode drawn once, before the loop: every step trains on the same batch, which the labels
alone cannot tell).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "blocks"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 40
D, CLASSES, N, K, Q = 16, 40, 5, 3, 6
means = torch.randn(CLASSES, D) * 1.5
encoder = nn.Sequential(nn.Linear(D, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 16))
opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)


def episode():
    classes = torch.randperm(CLASSES)[:N]
    if MODE == "turns":
        support = means[classes].repeat(K, 1) + torch.randn(N * K, D)
        query = means[classes].repeat(Q, 1) + torch.randn(N * Q, D)
        return support, query, torch.arange(N).repeat(Q)
    support = means[classes].repeat_interleave(K, 0) + torch.randn(N * K, D)
    query = means[classes].repeat_interleave(Q, 0) + torch.randn(N * Q, D)
    return support, query, torch.arange(N).repeat_interleave(Q)


fixed = episode()
for _ in range(STEPS):
    support, query, labels = fixed if MODE == "one-episode" else episode()
    z = encoder(torch.cat([support, query]))
    zs = z[: N * K].view(K, N, -1).transpose(0, 1) if MODE == "turns" else z[: N * K].view(N, K, -1)
    logits = -(torch.cdist(z[N * K :], zs.mean(1)) ** 2)
    loss = F.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", loss.item())
