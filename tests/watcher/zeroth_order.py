"""A zeroth-order training's pieces for the tests of runs with no backward: a regression
batch and a two-point (SPSA-like) estimate of its loss's gradient along one random
direction, perturbing the weights in place under no_grad and putting them back."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

X = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
Y = X.sum(1, keepdim=True)


def loss_of(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return F.mse_loss(model(X), Y)


def estimate(model: nn.Module, sigma: float = 1e-2) -> list[torch.Tensor]:
    params = list(model.parameters())
    noise = [torch.randn_like(p) for p in params]
    with torch.no_grad():
        for p, z in zip(params, noise, strict=True):
            p.add_(z, alpha=sigma)
        up = loss_of(model)
        for p, z in zip(params, noise, strict=True):
            p.sub_(z, alpha=2 * sigma)
        down = loss_of(model)
        for p, z in zip(params, noise, strict=True):
            p.add_(z, alpha=sigma)
    return [(up - down) / (2 * sigma) * z for z in noise]
