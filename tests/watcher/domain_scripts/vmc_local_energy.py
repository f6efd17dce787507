"""Variational Monte Carlo of a 1-D harmonic oscillator (FermiNet-style): a neural log|psi|,
walkers moved by Metropolis under no_grad, the local energy -1/2 (lap + |grad|^2) + V taken
by autograd.grad, and the score-function estimator mean((E_L - mean E_L).detach() * log|psi|).
Healthy by default (create_graph on both derivatives, so the forward the loss needs is
kept); bug `uncreated`: the Laplacian's autograd.grad without create_graph frees that
forward, and the loss's backward fails."""

import sys

import torch
import torch.nn as nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)


def log_psi(x):
    return -0.5 * x[:, 0] ** 2 + model(x)[:, 0]


x = torch.randn(32, 1)
for _ in range(3):
    with torch.no_grad():
        for _ in range(5):
            proposal = x + 0.5 * torch.randn_like(x)
            accept = torch.rand(32).log() < 2 * (log_psi(proposal) - log_psi(x))
            x = torch.where(accept[:, None], proposal, x)
    walkers = x.clone().requires_grad_(True)
    lp = log_psi(walkers)
    g = torch.autograd.grad(lp.sum(), walkers, create_graph=True)[0]
    lap = torch.autograd.grad(g.sum(), walkers, create_graph=MODE != "uncreated")[0]
    e_local = (-0.5 * (lap + g**2)[:, 0] + 0.5 * walkers[:, 0] ** 2).detach()
    loss = ((e_local - e_local.mean()) * lp).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
