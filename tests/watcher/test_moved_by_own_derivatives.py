"""A policy in its optimizer's param groups that the optimizer never steps, moved instead by
a step the script writes from derivatives it takes by torch.autograd.grad: SB3-contrib's
TRPO holds the whole policy in one Adam, steps only the value loss with it, and moves the
actor by conjugate gradient and a line search. GS413 called that a copy (an EMA teacher)
and advised `requires_grad_(False)`, which would break the natural-gradient step. An EMA
teacher in its student's optimizer is still told as a copy."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Severity


def _trpo_like(steps: int = 6):
    torch.manual_seed(0)
    actor, critic = nn.Linear(4, 2), nn.Linear(4, 1)
    opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(steps):
            obs, ret = torch.randn(64, 4), torch.randn(64, 1)
            act = torch.randint(0, 2, (64,))
            adv = torch.randn(64)
            surrogate = (F.log_softmax(actor(obs), -1).gather(1, act[:, None])[:, 0] * adv).mean()
            grads = torch.autograd.grad(surrogate, list(actor.parameters()))
            with torch.no_grad():  # the natural-gradient step, by hand
                for p, g in zip(actor.parameters(), grads, strict=True):
                    p.add_(0.01 * g / (g.norm() + 1e-8))
            value_loss = F.mse_loss(critic(obs), ret)
            opt.zero_grad()
            value_loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def _ema_teacher(steps: int = 6):
    torch.manual_seed(0)
    student = nn.Linear(4, 2)
    teacher = copy.deepcopy(student)
    opt = torch.optim.Adam([*student.parameters(), *teacher.parameters()], lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(steps):
            x = torch.randn(64, 4)
            with torch.no_grad():
                target = teacher(x).softmax(-1)
            loss = F.cross_entropy(student(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
                    t.mul_(0.9).add_(0.1 * s)
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_policy_moved_from_its_own_derivatives_is_not_told_as_a_copy():
    found = _trpo_like()
    assert found and all(f.severity == Severity.INFO for f in found), found
    for f in found:
        assert "torch.autograd.grad" in f.message and "copying" not in f.message
        assert "requires_grad_(False)" not in f.advice


def test_an_ema_teacher_in_the_optimizer_is_still_a_copy():
    found = _ema_teacher()
    assert found and all("by copying" in f.message for f in found), found
