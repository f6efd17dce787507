"""GS475 with the copy outside every optimizer: an actor-critic's target critic made by
deepcopy and never handed to an optimizer is not among the run's parameters, yet it is the
frozen copy when a Polyak update `soft_update(target, critic, tau)` runs backwards (the
critic is pulled toward its starting weights, the TD targets never move), also where the
target runs only by its parts (SPR's `target.encoder(x)`). Look-alikes stay
silent: the update the right way round, a target nothing updates while the critic is left
to its optimizer, and a source copy a stochastic restore writes the critic from beside an
EMA copy that follows it (CoTTA)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Finding


def soft_update(net: nn.Module, target: nn.Module, tau: float) -> None:
    """SAC-AE's and DrQ's soft_update_params(net, target_net, tau), as written there."""
    for param, target_param in zip(net.parameters(), target.parameters(), strict=True):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


def _td(update: str) -> list[Finding]:
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    target = copy.deepcopy(critic)
    source = copy.deepcopy(critic)
    opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(8):
            obs, next_obs, reward = torch.randn(16, 6), torch.randn(16, 6), torch.randn(16, 1)
            with torch.no_grad():
                ahead = (
                    target(next_obs) if update != "swapped-parts" else _by_parts(target, next_obs)
                )
                y = reward + 0.99 * ahead + (0 * source(obs) if update == "restore" else 0)
            loss = F.mse_loss(critic(obs), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if update.startswith("swapped"):
                soft_update(target, critic, 0.05)
            elif update in ("polyak", "restore"):
                soft_update(critic, target, 0.05)
            if update == "restore":
                with torch.no_grad():
                    for p, s in zip(critic.parameters(), source.parameters(), strict=True):
                        keep = (torch.rand(p.shape) < 0.3).float()
                        p.data = s * keep + p * (1.0 - keep)
    return w.report.findings


def _by_parts(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    for part in model.children():
        x = part(x)
    return x


@pytest.mark.parametrize("update", ["swapped", "swapped-parts"])
def test_a_polyak_update_swapped_onto_an_untracked_target_is_named(update):
    found = [f for f in _td(update) if f.rule == "GS475"]
    assert [f.subject for f in found] == ["Sequential"], found
    assert "its Sequential copy in no optimizer, a copy of it" in found[0].message
    assert "never changed" in found[0].message and "swapped" in found[0].message


@pytest.mark.parametrize("update", ["polyak", "frozen", "restore"])
def test_the_right_way_round_and_its_look_alikes_are_silent(update):
    assert "GS475" not in [f.rule for f in _td(update)]
