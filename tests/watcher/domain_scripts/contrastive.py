"""Contrastive encoders, whose cross-entropy's targets are places in the batch; the case
picked by argv[1]:

moco      MoCo v2: a momentum key encoder and a queue of 1024 negatives, InfoNCE with
          label 0 (the positive first). The loss rises early by design: the queue starts
          as random vectors, easy negatives, and fills with real keys (healthy)
clip      CLIP: two encoders, a learnable logit scale clamped in place, labels 0..n-1
          (healthy)
cls-lr    the same encoder as a classifier of the prototypes (labels are data) under Adam
          at lr 1.0, far too high: its loss blows up early"""

import copy
import math
import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
CASE = sys.argv[1] if len(sys.argv) > 1 else "moco"
D, N, E, K, P = 32, 64, 32, 1024, 50
protos = torch.randn(P, D)


def encoder():
    return nn.Sequential(nn.Linear(D, 128), nn.ReLU(), nn.Linear(128, E))


def view(x):
    return x + 0.3 * torch.randn_like(x)


q_enc = encoder()
k_enc = copy.deepcopy(q_enc).requires_grad_(False)
t_enc = encoder()
scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
head = nn.Linear(E, P)
if CASE == "moco":
    opt = torch.optim.SGD(q_enc.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
elif CASE == "clip":
    params = [*q_enc.parameters(), *t_enc.parameters(), scale]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)
else:
    opt = torch.optim.Adam([*q_enc.parameters(), *head.parameters()], lr=1.0)
queue, ptr = F.normalize(torch.randn(E, K), dim=0), 0

for _step in range(80):
    y = torch.randint(0, P, (N,))
    x = protos[y] + 0.3 * torch.randn(N, D)
    if CASE == "moco":
        q = F.normalize(q_enc(view(x)), dim=1)
        with torch.no_grad():
            for pk, pq in zip(k_enc.parameters(), q_enc.parameters(), strict=True):
                pk.mul_(0.99).add_(pq, alpha=0.01)
            k = F.normalize(k_enc(view(x)), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.clone()], 1) / 0.2
        loss = F.cross_entropy(logits, torch.zeros(N, dtype=torch.long))
    elif CASE == "clip":
        zi, zt = F.normalize(q_enc(x), dim=-1), F.normalize(t_enc(view(x)), dim=-1)
        logits = scale.exp() * zi @ zt.t()
        labels = torch.arange(N)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    else:
        loss = F.cross_entropy(head(F.relu(q_enc(x))), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if CASE == "moco":
        queue[:, ptr : ptr + N] = k.T
        ptr = (ptr + N) % K
    elif CASE == "clip":
        with torch.no_grad():
            scale.clamp_(0, math.log(100))
