"""A classifier trained on probability targets, the case picked by argv[1]:

mixup           Mixup with label smoothing folded into the targets: cross_entropy(logits, t)
                with t a mix of two one-hot rows (healthy)
distill         a student matched to a fixed teacher's softened probabilities, the KD loss of
                Hinton et al.: T² · cross-entropy of log_softmax(student / T) against them (healthy)
mixup-softmax   Mixup's cross_entropy fed softmax(logits): a double softmax
distill-softmax the student's softmax under the KD loss's own log_softmax"""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
CASE = sys.argv[1] if len(sys.argv) > 1 else "mixup"
D, C, N, T = 16, 10, 64, 4.0
centers = torch.randn(C, D) * 1.5
net = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, C))
teacher = nn.Linear(D, C)
with torch.no_grad():
    teacher.weight.copy_(centers * 2)
teacher.requires_grad_(False)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
mix = torch.distributions.Beta(torch.tensor(0.4), torch.tensor(0.4))

for _step in range(60):
    y = torch.randint(0, C, (N,))
    x = centers[y] + torch.randn(N, D)
    if CASE.startswith("mixup"):
        lam, perm = mix.sample(), torch.randperm(N)
        x = lam * x + (1 - lam) * x[perm]
        target = lam * F.one_hot(y, C) + (1 - lam) * F.one_hot(y[perm], C)
        target = 0.9 * target + 0.1 / C
        out = net(x)
        loss = F.cross_entropy(F.softmax(out, 1) if CASE == "mixup-softmax" else out, target)
    else:
        soft = F.softmax(teacher(x) / T, -1)
        out = net(x)
        out = F.softmax(out, -1) if CASE == "distill-softmax" else out
        loss = -(soft * F.log_softmax(out / T, -1)).sum(-1).mean() * T * T
    opt.zero_grad()
    loss.backward()
    opt.step()
