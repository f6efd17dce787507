"""A neural SDE integrated as torchsde's `sdeint` does it: the user's SDE (drift `f`,
diffusion `g`) is wrapped inside the call in a module of the library's own (ForwardSDE),
kept alive by the solve, and Euler-Maruyama steps it with increments of scale sqrt(dt);
the paths' moments are fitted to an Ornstein-Uhlenbeck process's. Modes: `library` (the
shell is the library's class), `own` (the script's own wrapper class); bug `cut` (the
diffusion's output detached: its net gets no gradient)."""

import math
import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "library"
D, N, T, STEPS = 2, 16, 8, 4
_SOLVES = []  # the solver's state, as torchsde's keeps its wrapper for the backward


class ForwardSDE(nn.Module):
    def __init__(self, sde):
        super().__init__()
        self._base_sde = sde


class OwnWrapper(ForwardSDE):
    pass


if MODE != "own":
    ForwardSDE.__module__ = "torch.nn.modules.module"  # defined in an installed library


class SDE(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, D))
        self.g = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, D))

    def diffusion(self, y):
        out = nn.functional.softplus(self.g(y))
        return out.detach() if MODE == "cut" else out


def sdeint(sde, y0, dt):
    shell = (OwnWrapper if MODE == "own" else ForwardSDE)(sde)
    _SOLVES[:] = [shell]
    ys, y = [y0], y0
    for _ in range(T):
        dw = torch.randn_like(y) * math.sqrt(dt)
        y = y + shell._base_sde.f(y) * dt + shell._base_sde.diffusion(y) * dw
        ys.append(y)
    return torch.stack(ys)


def ornstein_uhlenbeck(dt):
    ys, y = [torch.ones(N, D)], torch.ones(N, D)
    for _ in range(T):
        y = y - 2.0 * y * dt + 0.5 * math.sqrt(dt) * torch.randn(N, D)
        ys.append(y)
    return torch.stack(ys)


sde = SDE()
opt = torch.optim.Adam(sde.parameters(), lr=3e-3)
for _ in range(STEPS):
    data, ys = ornstein_uhlenbeck(1 / T), sdeint(sde, torch.ones(N, D), 1 / T)
    loss = ((ys.mean(1) - data.mean(1)) ** 2).sum() + ((ys.std(1) - data.std(1)) ** 2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
