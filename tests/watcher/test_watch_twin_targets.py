"""GS411 on twin critics and their two targets (TD3, SAC, CQL): several trained tensors
share a name below their module and a shape (Critic.net.0.weight in both critics, and a
hidden layer of the actor shaped like the critics'), so each target is matched to the
critic it started equal to. A target computed with gradients is named a copy in every
tensor, never half of it "moved by a rule by hand"; the targets done right stay quiet."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Severity


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, 1)

    def forward(self, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.head(self.net(torch.cat([s, a], 1))).squeeze(-1)


class Actor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, 2)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.head(self.net(s)))


def _td3(
    targets_with_grad: bool, steps: int = 12, targets_in_optimizer: bool = False, delay: int = 2
):
    """TD3's critic update with soft (Polyak) targets, moved every other step (TD3's
    delayed update; SAC's: every step, delay 1); the actor and its target are there for
    the names and shapes they share with the critics."""
    torch.manual_seed(0)
    actor, c1, c2 = Actor(), Critic(), Critic()
    actor_t, c1_t, c2_t = (copy.deepcopy(m) for m in (actor, c1, c2))
    actor_opt = torch.optim.Adam(actor.parameters(), 1e-3)
    critics = [c1, c2, c1_t, c2_t] if targets_in_optimizer else [c1, c2]
    critic_opt = torch.optim.Adam([p for c in critics for p in c.parameters()], 1e-3)
    with gradscope.watch() as w:
        for step in range(steps):
            s, r = torch.randn(32, 4), torch.randn(32)
            s2 = s + 0.05 * torch.randn(32, 4)  # a small control step
            a = torch.rand(32, 2) * 2 - 1
            with torch.set_grad_enabled(targets_with_grad):
                a2 = actor_t(s2)
                y = r + 0.99 * torch.min(c1_t(s2, a2), c2_t(s2, a2))
            critic_loss = F.mse_loss(c1(s, a), y) + F.mse_loss(c2(s, a), y)
            critic_opt.zero_grad()
            critic_loss.backward()
            critic_opt.step()
            if step % delay:
                continue
            actor_loss = -c1(s, actor(s)).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            with torch.no_grad():
                for target, source in ((actor_t, actor), (c1_t, c1), (c2_t, c2)):
                    for pt, ps in zip(target.parameters(), source.parameters(), strict=True):
                        pt.lerp_(ps, 0.005)
    assert not w.report.faults
    return w.report.findings


def test_every_tensor_of_both_targets_is_named_a_copy_of_its_own_critic():
    outside = [f for f in _td3(targets_with_grad=True) if f.rule == "GS411"]
    critic_targets = [f for f in outside if f.subject.startswith("Critic")]
    assert len(critic_targets) == 2 * 6, [f.subject for f in outside]
    assert all(f.severity is Severity.ERROR for f in outside), [
        (f.subject, f.severity) for f in outside
    ]
    originals = {}
    for f in critic_targets:
        assert "looks like a copy of Critic" in f.advice, f.advice
        mirrored = f.advice.split("looks like a copy of ")[1].split(".")[0]
        originals.setdefault(f.subject.split(".")[0], set()).add(mirrored)
    assert all(len(m) == 1 for m in originals.values()), originals
    assert len({next(iter(m)) for m in originals.values()}) == 2, originals


def test_twin_targets_under_no_grad_stay_quiet():
    found = _td3(targets_with_grad=False)
    assert not [f for f in found if f.severity >= Severity.WARNING], [
        (f.rule, f.subject) for f in found
    ]


def _ddpg_target_trained(steps: int = 30):
    """DDPG's critic with its Polyak target in the optimizer and its forward attached, on
    data of the policy itself and small control steps (s' near s): the target's TD
    gradient is nearly the negation of the critic's, cosine below -0.99."""
    torch.manual_seed(0)
    actor, critic = Actor(), Critic()
    target = copy.deepcopy(critic)
    opt = torch.optim.Adam([*critic.parameters(), *target.parameters()], 1e-3)
    with gradscope.watch() as w:
        for step in range(steps):
            s, r = torch.randn(64, 4), torch.randn(64)
            s2 = s + 0.01 * torch.randn(64, 4)
            with torch.no_grad():
                a, a2 = actor(s), actor(s2)
            loss = F.mse_loss(critic(s, a), r + 0.99 * target(s2, a2))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 2 == 0:
                with torch.no_grad():
                    for pt, ps in zip(target.parameters(), critic.parameters(), strict=True):
                        pt.lerp_(ps, 0.005)
    assert not w.report.faults
    return [f for f in w.report.findings if f.rule == "GS447"]


def test_a_target_trained_by_the_optimizer_is_named_a_target_not_a_reference():
    """A copy the script writes between steps is a target, whatever its gradients' cosine:
    not a log-ratio's reference (never written)."""
    (found,) = _ddpg_target_trained()
    assert "synced by hand" in found.message and "log-ratio" not in found.message
    other = {"Critic": "Critic2", "Critic2": "Critic"}[found.subject]
    assert f"{found.subject} is a copy of {other} " in found.message, found.message


def test_twin_targets_trained_by_the_optimizer_are_named_together():
    (found,) = [f for f in _td3(True, steps=30, targets_in_optimizer=True) if f.rule == "GS447"]
    assert "synced by hand" in found.message and "log-ratio" not in found.message
    copies, _, originals = found.message.partition(" is a copy of ")
    assert copies.count("Critic") == 2 and originals.split(" (")[0].count("Critic") == 2


def test_twin_targets_averaged_every_step_and_trained_each_name_its_own_critic():
    """SAC's targets, Polyak-averaged at every step, in the optimizer (GS446): each target
    is the copy of the critic it started equal to, not both of the last one found."""
    found = [
        f for f in _td3(True, steps=30, targets_in_optimizer=True, delay=1) if f.rule == "GS446"
    ]
    sources = {f.subject: f.message.split("is a copy of ")[1].split(" ")[0] for f in found}
    assert len(sources) == 2 and len(set(sources.values())) == 2, sources
    assert all("target network" in f.message for f in found)


def _dqn_target_attached(steps: int = 6):
    """A DQN whose target network (a deep copy, outside the optimizer) is computed with
    gradients: at the first backward, before any step, the graph's walk reaches the
    target before the network trained."""
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    target = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), 1e-3)
    with gradscope.watch() as w:
        for _ in range(steps):
            s, s2, r = torch.randn(16, 6), torch.randn(16, 6), torch.randn(16)
            a = torch.randint(0, 3, (16, 1))
            y = r + 0.99 * target(s2).max(1).values
            loss = F.mse_loss(q(s).gather(1, a).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert not w.report.faults
    return w.report.findings


def test_the_network_trained_keeps_the_plain_name_and_its_target_the_numbered_one():
    outside = [f for f in _dqn_target_attached() if f.rule == "GS411"]
    assert outside and all(f.subject.startswith("Sequential2.") for f in outside), [
        f.subject for f in outside
    ]
    assert all("copy of Sequential." in f.advice for f in outside)
