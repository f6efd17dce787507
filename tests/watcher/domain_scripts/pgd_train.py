"""PGD adversarial training (Madry et al. 2018) on a tiny classifier. argv[1]:

backward   the attack's gradient by `loss.backward()` on `delta` (the model's gradients
           it leaves are cleared by model.zero_grad() before the training backward)
grad       the attack's gradient by `torch.autograd.grad(loss, x_adv)`
saliency   no attack: an input-gradient map by backward, then model.zero_grad()
wiped      (bug) the autograd.grad attack, then two micro-batches with zero_grad inside
manual     (bug) the backward attack, then the model updated by hand, never reset
leak       (bug) the backward attack with no model.zero_grad() before the training backward

argv[2]: the attack's steps (3; Madry's MNIST recipe takes 40)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "backward"
torch.manual_seed(0)
D, C, EPS, ALPHA = 20, 5, 0.1, 0.03
K = int(sys.argv[2]) if len(sys.argv) > 2 else 3
W = torch.randn(D, C)
model = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, C))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def attack_backward(x, y):
    delta = torch.zeros_like(x).uniform_(-EPS, EPS).requires_grad_(True)
    for _ in range(K):
        F.cross_entropy(model(x + delta), y).backward()
        delta.data = (delta + ALPHA * delta.grad.sign()).clamp(-EPS, EPS)
        delta.grad.zero_()
    return (x + delta).detach()


def attack_grad(x, y):
    x_adv = x + 0.001 * torch.randn_like(x)
    for _ in range(K):
        x_adv.requires_grad_(True)
        (g,) = torch.autograd.grad(F.cross_entropy(model(x_adv), y), [x_adv])
        x_adv = torch.min(torch.max(x_adv.detach() + ALPHA * g.sign(), x - EPS), x + EPS)
    return x_adv.detach()


def saliency(x, y):
    x = x.clone().requires_grad_(True)
    F.cross_entropy(model(x), y).backward()
    return x.grad.abs().mean()


for _step in range(40):
    x = torch.randn(32, D)
    y = (x @ W).argmax(1)
    if MODE == "wiped":
        x_adv = attack_grad(x, y)
        for xm, ym in zip(x_adv.chunk(2), y.chunk(2), strict=True):
            opt.zero_grad()
            (F.cross_entropy(model(xm), ym) / 2).backward()
        opt.step()
        continue
    if MODE == "saliency":
        saliency(x, y)
        x_adv = x
    else:
        x_adv = attack_grad(x, y) if MODE == "grad" else attack_backward(x, y)
    if MODE == "manual":
        F.cross_entropy(model(x_adv), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.05 * p.grad
        continue
    if MODE == "leak":  # the attack's parameter gradients stay in .grad
        F.cross_entropy(model(x_adv), y).backward()
        opt.step()
        opt.zero_grad()
        continue
    model.zero_grad()
    loss = F.cross_entropy(model(x_adv), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
