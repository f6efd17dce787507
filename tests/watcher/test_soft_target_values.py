"""A teacher's raw logits handed to cross_entropy as its soft targets (the softmax
forgotten): torch reads any float target of the logits' shape as class probabilities, and
-target·log p of a negative target falls without bound, so the loss has no minimum and the
run blows up. gradscope blamed the learning rate (GS419, "lower it 834×"); now GS431 names
the targets from the graph, in watch and in inspect. Probability targets (a teacher's
softmax, mixup's mix, smoothed one-hots, a bootstrapped mix with the model's own
predictions) are right."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _targets(teacher: torch.Tensor, out: torch.Tensor, how: str) -> torch.Tensor:
    if how == "teacher-logits":
        return teacher
    if how == "centred-logits":
        return teacher - teacher.mean(1, keepdim=True)
    if how == "teacher-softmax":
        return F.softmax(teacher / 2.0, 1)
    hard = F.one_hot(teacher.argmax(1), 5).float()
    if how == "mixup":
        return 0.7 * hard + 0.3 * hard.flip(0)
    if how == "smoothed":
        return hard * 0.9 + 0.1 / 5
    return 0.8 * hard + 0.2 * F.softmax(out, 1).detach()  # soft bootstrapping


def _distil(how: str, steps: int = 3) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    teacher, student = nn.Linear(6, 5), nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))
    opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
    with gradscope.watch() as w:
        for _ in range(steps):
            x = torch.randn(16, 6)
            with torch.no_grad():
                t = teacher(x) * 3
            out = student(x)
            loss = F.cross_entropy(out, _targets(t, out, how))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


@pytest.mark.parametrize("how", ["teacher-logits", "centred-logits"])
def test_logits_as_soft_targets_are_named(how):
    (found,) = _distil(how)
    assert "probability targets" in found.message and "F.softmax" in found.advice
    assert not any("never below" in e for e in found.evidence)  # no floor: unbounded


@pytest.mark.parametrize("how", ["teacher-softmax", "mixup", "smoothed", "bootstrapped"])
def test_probability_targets_are_right(how):
    assert _distil(how) == []


def test_inspect_names_it_too():
    teacher = torch.randn(8, 5) * 3

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out, teacher)

    report = gradscope.inspect(nn.Linear(6, 5), torch.randn(8, 6), loss_fn)
    (found,) = [f for f in report.findings if f.rule == "GS432"]
    assert "F.softmax" in found.advice
    plain = gradscope.inspect(
        nn.Linear(6, 5), torch.randn(8, 6), lambda o: F.cross_entropy(o, teacher.softmax(1))
    )
    assert "GS432" not in {f.rule for f in plain.findings}


def _policy_gradient(how: str, steps: int = 3) -> list[gradscope.Finding]:
    """REINFORCE written as the product cross_entropy makes, -Σ w · log_softmax(z): the
    advantage on the action taken (one_hot(a) · A), or every action's advantage under the
    policy (Q - Σ π·Q, an all-actions policy gradient). Both weights take both signs."""
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(steps):
            obs = torch.randn(32, 4)
            logp = F.log_softmax(policy(obs), -1)
            if how == "taken":
                act = torch.distributions.Categorical(logits=logp.detach()).sample()
                adv = obs[:, 0] * (act == 1).float() - 0.3
                weights = F.one_hot(act, 3).float() * adv[:, None]
            else:
                q = obs[:, :3]
                weights = q - (logp.detach().exp() * q).sum(-1, keepdim=True)
            loss = -(weights * logp).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


@pytest.mark.parametrize("how", ["taken", "all-actions"])
def test_a_policy_gradients_signed_advantages_are_no_targets(how):
    assert _policy_gradient(how) == []
