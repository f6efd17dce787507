"""A physics-informed network for u'' = -pi^2 sin(pi x), u(0) = u(1) = 0: the residual's
derivatives by autograd.grad(create_graph=True) of the output w.r.t. collocation points
drawn fresh each step with requires_grad, Adam then LBFGS (the DeepXDE / Raissi loop).
argv[1]: `forward` (the PDE known), `inverse` (its coefficient learnt with the net: a
plain tensor in Adam's param groups), `forgot` (bug: that coefficient left out of Adam)."""

import math
import sys

import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
EDGES = torch.tensor([[0.0], [1.0]])
MODE = sys.argv[1] if len(sys.argv) > 1 else "forward"
coef = torch.tensor(1.0, requires_grad=MODE != "forward")


def residual_loss(x):
    u = net(x)
    (du,) = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)
    (d2u,) = torch.autograd.grad(du, x, torch.ones_like(du), create_graph=True)
    pde = (coef * d2u + math.pi**2 * torch.sin(math.pi * x)) ** 2
    return pde.mean() + (net(EDGES) ** 2).mean()


trained = [*net.parameters(), *([coef] if MODE == "inverse" else [])]
adam = torch.optim.Adam(trained, lr=3e-3)
for _ in range(30):
    loss = residual_loss(torch.rand(32, 1, requires_grad=True))
    adam.zero_grad()
    loss.backward()
    adam.step()

points = torch.rand(32, 1)
lbfgs = torch.optim.LBFGS(trained, max_iter=10, line_search_fn="strong_wolfe")


def closure():
    lbfgs.zero_grad()
    loss = residual_loss(points.clone().requires_grad_(True))
    loss.backward()
    return loss


for _ in range(4):
    lbfgs.step(closure)
