"""A target critic that the actor's loss differentiates through (GS411): short-horizon
actor-critic through a differentiable simulator (SHAC) values the rollout's last state with
a target critic, that state computed by the actor, so the actor's gradient flows through
the copy. Its weights are left trainable in the reference code, and their .grad, which no
step applies, was an error whose advice (no_grad or .detach() on the copy) would cut the
actor's gradient. A copy fed a state already detached is still the error: only the copy's
own weights get that gradient."""

from __future__ import annotations

import copy

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


def _outside(feed: str) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    actor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2), nn.Tanh())
    critic = nn.Sequential(nn.Linear(4, 16), nn.ELU(), nn.Linear(16, 1))
    target = copy.deepcopy(critic)
    a_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    c_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(6):
            s, states, loss = torch.randn(8, 4), [], torch.zeros(())
            for _ in range(6):
                states.append(s.detach())
                a = actor(s)
                s = torch.cat([s[:, :2] + 0.1 * s[:, 2:], s[:, 2:] + 0.1 * a], -1)
                loss = loss + (s[:, :2] ** 2).sum(-1).mean()
            last = s if feed == "rollout" else s.detach()
            loss = (loss - 0.9 * target(last).mean()) / 6
            a_opt.zero_grad()
            loss.backward()
            a_opt.step()
            obs = torch.cat(states)
            c_loss = (critic(obs).squeeze(-1) + (obs[:, :2] ** 2).sum(-1)).pow(2).mean()
            c_opt.zero_grad()
            c_loss.backward()
            c_opt.step()
            with torch.no_grad():
                for p, q in zip(critic.parameters(), target.parameters(), strict=True):
                    q.lerp_(p, 0.2)
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_a_target_critic_the_actor_differentiates_through_is_information():
    found = _outside("rollout")
    assert found and all(f.severity is Severity.INFO for f in found)
    for f in found:
        assert "requires_grad_(False)" in f.advice and "do not compute it under" in f.advice


def test_a_target_critic_fed_a_detached_state_is_still_the_error():
    found = _outside("detached")
    assert found and all(f.severity is Severity.ERROR for f in found)
