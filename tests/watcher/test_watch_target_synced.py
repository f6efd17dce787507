"""GS447 on a target network synced by hand: DQN's target, deep-copied from the Q-network
and loaded from it every N steps, but left in the optimizer with its forward attached, so
the optimizer trains it between syncs. Look-alikes stay silent: the target done right
(no_grad, out of the optimizer), two towers from one checkpoint trained side by side (never
overwritten), and an EMA teacher in the optimizer (GS446's, not repeated here)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _agent() -> nn.ModuleDict:
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3))
    return nn.ModuleDict({"q": q, "target": copy.deepcopy(q)})


def _dqn(target_trained: bool, sync_every: int = 25, steps: int = 60, ema: bool = False):
    agent = _agent()
    q, target = agent["q"], agent["target"]
    params = list(agent.parameters()) if target_trained else list(q.parameters())
    if not target_trained:
        target.requires_grad_(False)
    opt = torch.optim.Adam(params, lr=1e-3)
    with gradscope.watch() as w:
        for step in range(1, steps + 1):
            s, s2 = torch.randn(16, 6), torch.randn(16, 6)
            a, r = torch.randint(0, 3, (16,)), torch.randn(16)
            with torch.set_grad_enabled(target_trained):
                bootstrap = r + 0.9 * target(s2).max(1).values
            loss = F.smooth_l1_loss(q(s).gather(1, a[:, None]).squeeze(1), bootstrap)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                if ema:
                    for pt, pq in zip(target.parameters(), q.parameters(), strict=True):
                        pt.lerp_(pq, 0.05)
                elif step % sync_every == 0:
                    target.load_state_dict(q.state_dict())
    assert not w.report.faults
    return w.report.findings


def _towers():
    """A dual encoder: both towers from one checkpoint, both trained, never overwritten."""
    agent = _agent()
    opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(60):
            x, y = torch.randn(16, 6), torch.randn(16, 6)
            sim = agent["q"](x) @ agent["target"](y).T
            loss = F.cross_entropy(sim, torch.arange(16))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.findings


def test_a_target_synced_by_hand_and_trained_by_the_optimizer_is_named():
    (found,) = [f for f in _dqn(target_trained=True) if f.rule == "GS447"]
    assert found.subject == "target"
    assert "synced by hand" in found.message and "copy of q" in found.message
    assert "torch.no_grad()" in found.advice and "out of the optimizer" in found.advice


def test_the_target_done_right_two_towers_and_an_ema_teacher_are_not_this():
    assert not [f for f in _dqn(target_trained=False) if f.rule == "GS447"]
    assert not [f for f in _towers() if f.rule == "GS447"]
    ema = _dqn(target_trained=True, ema=True)
    assert [f.rule for f in ema if f.rule in ("GS446", "GS447")] == ["GS446"]
