"""A learning rate learned by unrolled differentiation: a learnable log-lr inside a
differentiable inner SGD loop of 3 steps (torch.func.functional_call), Adam on the log-lr
against a validation loss, the inner loop's weights written back to the model after each
meta-step. The model's weights get the meta-gradient as a by-product, in no optimizer,
reset by net.zero_grad(). Modes: `unrolled`; bug `no-write-back` (the inner loop's weights
are never written back: the model never changes)."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

MODE = sys.argv[1] if len(sys.argv) > 1 else "unrolled"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
log_lr = nn.Parameter(torch.tensor(-3.0))
meta_opt = torch.optim.Adam([log_lr], lr=0.05)
W = torch.randn(8, 1)
for _ in range(STEPS):
    params = dict(net.named_parameters())
    for _inner in range(3):
        x = torch.randn(32, 8)
        inner = F.mse_loss(functional_call(net, params, (x,)), x @ W)
        grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
        params = {k: v - log_lr.exp() * g for (k, v), g in zip(params.items(), grads, strict=True)}
    xv = torch.randn(64, 8)
    val = F.mse_loss(functional_call(net, params, (xv,)), xv @ W)
    meta_opt.zero_grad()
    val.backward()
    meta_opt.step()
    if MODE != "no-write-back":
        with torch.no_grad():  # the inner trajectory becomes the weights
            for k, p in net.named_parameters():
                p.copy_(params[k])
    net.zero_grad()
print(f"final validation loss {val.item():.4g}, lr {log_lr.exp().item():.3g}")
