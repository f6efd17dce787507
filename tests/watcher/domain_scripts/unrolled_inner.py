"""Unrolled inner optimisation: bilevel hyper-parameter learning (a per-feature weight decay
learned through 5 unrolled SGD steps of a linear model, torch.autograd.grad with
create_graph), dataset distillation (Wang et al. 2018: synthetic inputs and a learning rate
learned through 3 unrolled steps of a fresh network, torch.func.functional_call) and
first-order MAML (create_graph left False by design: the meta-parameters learn through the
adapted weights). Modes: `bilevel`, `distill`, `fomaml`; bugs `bilevel-plain` and
`distill-plain` (create_graph left False: the weight decay, the synthetic inputs never get a
gradient) and `bilevel-unused` (a learned inner learning rate handed to the optimizer that
the inner step never reads)."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

MODE = sys.argv[1] if len(sys.argv) > 1 else "bilevel"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 12
PLAIN = MODE.endswith("-plain") or MODE == "fomaml"
torch.manual_seed(0)
D, C = 8, 3


def bilevel():
    x_tr, x_val, w_true = torch.randn(32, D), torch.randn(32, D), torch.randn(D)
    y_tr, y_val = x_tr @ w_true + 0.5 * torch.randn(32), x_val @ w_true
    log_decay = nn.Parameter(torch.full((D,), -2.0))
    log_lr = nn.Parameter(torch.tensor(-2.0))  # read only by the bug `bilevel-unused`
    hyper = [log_decay, log_lr] if MODE == "bilevel-unused" else [log_decay]
    opt = torch.optim.Adam(hyper, lr=0.05)
    for _ in range(STEPS):
        w = torch.zeros(D, requires_grad=True)
        for _ in range(5):
            inner = F.mse_loss(x_tr @ w, y_tr) + (log_decay.exp() * w * w).sum()
            (g,) = torch.autograd.grad(inner, w, create_graph=not PLAIN)
            w = w - 0.1 * g
        loss = F.mse_loss(x_val @ w, y_val)
        opt.zero_grad()
        loss.backward()
        opt.step()


def distill():
    w_true = torch.randn(D, C)
    net = nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, C))
    x_syn = nn.Parameter(torch.randn(2 * C, D))
    y_syn = torch.arange(C).repeat(2)
    log_lr = nn.Parameter(torch.tensor(-1.0))
    opt = torch.optim.Adam([x_syn, log_lr], lr=0.05)
    for _ in range(STEPS):
        params = {k: v.detach().requires_grad_() for k, v in net.named_parameters()}
        for _ in range(3):
            inner = F.cross_entropy(functional_call(net, params, (x_syn,)), y_syn)
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=not PLAIN)
            params = {
                k: v - log_lr.exp() * g for (k, v), g in zip(params.items(), grads, strict=True)
            }
        x = torch.randn(64, D)
        loss = F.cross_entropy(functional_call(net, params, (x,)), (x @ w_true).argmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()


def fomaml():
    net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(STEPS):
        amp, phase = 1 + 4 * torch.rand(1), 3 * torch.rand(1)
        x_s, x_q = 10 * torch.rand(10, 1) - 5, 10 * torch.rand(10, 1) - 5
        params = dict(net.named_parameters())
        inner = F.mse_loss(functional_call(net, params, (x_s,)), amp * torch.sin(x_s + phase))
        grads = torch.autograd.grad(inner, list(params.values()), create_graph=False)
        params = {k: v - 0.01 * g for (k, v), g in zip(params.items(), grads, strict=True)}
        loss = F.mse_loss(functional_call(net, params, (x_q,)), amp * torch.sin(x_q + phase))
        opt.zero_grad()
        loss.backward()
        opt.step()


{"bilevel": bilevel, "distill": distill, "fomaml": fomaml}[MODE.split("-")[0]]()
