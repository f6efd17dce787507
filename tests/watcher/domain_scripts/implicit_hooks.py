"""Gradient hooks as implicit layers use them: a deep equilibrium model as the implicit-layers
tutorial writes it (the fixed point solved under no_grad, one step re-attached, the backward
replaced by the adjoint fixed point solved in `z.register_hook`, the hook removing itself),
and hooks on a weight. Modes: `deq`; `clip-once` (a clipping hook registered once on each
weight before the loop) and `two-hooks` (two different hooks on one weight); bugs
`deq-twice` (the implicit hook registered twice on the same z: the adjoint solved twice) and
`scale-each-step` (a scaling hook registered on a weight at every step, never removed)."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MODE = sys.argv[1] if len(sys.argv) > 1 else "deq"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
torch.manual_seed(0)


def solve(f, z0, iters=20):
    z = z0
    for _ in range(iters):
        z = f(z)
    return z


class Cell(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        with torch.no_grad():
            self.lin.weight.mul_(0.3)

    def forward(self, z, x):
        return torch.tanh(self.lin(z) + x)


class DEQ(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.f, self.hook = Cell(d), None

    def forward(self, x):
        with torch.no_grad():
            z = solve(lambda z: self.f(z, x), torch.zeros_like(x))
        z = self.f(z, x)
        z0 = z.clone().detach().requires_grad_()
        f0 = self.f(z0, x)

        def backward_hook(grad):
            if self.hook is not None:
                self.hook.remove()
            return solve(
                lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad
            )

        if z.requires_grad:
            self.hook = z.register_hook(backward_hook)
            if MODE == "deq-twice":
                z.register_hook(backward_hook)
        return z


model = nn.Sequential(nn.Linear(6, 8), DEQ(8), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
head = model[2].weight
if MODE == "clip-once":
    for p in model.parameters():
        p.register_hook(lambda g: g.clamp(-1.0, 1.0))
if MODE == "two-hooks":
    head.register_hook(lambda g: g.clamp(-1.0, 1.0))
    head.register_hook(lambda g: torch.nan_to_num(g))
for _ in range(STEPS):
    if MODE == "scale-each-step":
        head.register_hook(lambda g: g * 0.5)
    x = torch.randn(16, 6)
    loss = F.cross_entropy(model(x), x[:, :3].argmax(1))
    opt.zero_grad()
    loss.backward()
    opt.step()
