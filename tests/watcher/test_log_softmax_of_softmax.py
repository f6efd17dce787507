"""A policy network that already ends in a softmax, its log-probabilities taken by
F.log_softmax (a REINFORCE or bandit loss written by hand): the probabilities are
normalised again as logits, so no action's probability can pass e/(e + C - 1). The
policy-gradient loss is no loss gradscope reads, so it went unnamed; GS431 (watch) and
GS432 (inspect) name it now. log_softmax over the logits, and cross_entropy over a softmax
(named once, as the loss's own input), are the look-alikes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _policy(softmax: bool) -> nn.Sequential:
    torch.manual_seed(0)
    head = [nn.Softmax(dim=-1)] if softmax else []
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3), *head)


def _bandit(softmax: bool, steps: int = 6) -> list[gradscope.Finding]:
    """REINFORCE with an entropy bonus on a 3-armed contextual bandit, log_softmax by hand."""
    policy = _policy(softmax)
    opt = torch.optim.RMSprop(policy.parameters(), lr=3e-3)
    with gradscope.watch() as w:
        for _ in range(steps):
            obs = torch.randn(32, 4)
            logp_all = F.log_softmax(policy(obs), dim=-1)
            act = torch.multinomial(logp_all.exp().detach(), 1)
            reward = (act.squeeze(1) == (obs[:, 0] > 0).long()).float()
            logp = logp_all.gather(1, act).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = -((reward - reward.mean()) * logp).mean() - 0.01 * entropy
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


def test_log_softmax_over_a_softmax_is_named():
    (found,) = _bandit(softmax=True)
    assert "normalised again as logits by log_softmax" in found.message
    assert "log_softmax(z)" in found.advice


def test_log_softmax_over_logits_is_right():
    assert _bandit(softmax=False) == []


def test_cross_entropy_over_a_softmax_is_named_once_as_its_input():
    model = _policy(softmax=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradscope.watch() as w:
        for _ in range(3):
            loss = F.cross_entropy(model(torch.randn(16, 4)), torch.randint(0, 3, (16,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    (found,) = [f for f in w.report.findings if f.rule == "GS431"]
    assert "cross_entropy's own log_softmax" in found.message
    assert "normalised again as logits" not in found.message
    (kind,) = [w.report.run.loss_kind(0)]
    assert kind is not None and kind.renormalised is None


def test_inspect_names_it_too():
    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        act = torch.arange(out.shape[0]) % 3
        return -(F.log_softmax(out, -1)[torch.arange(8), act] * torch.linspace(-1, 1, 8)).mean()

    report = gradscope.inspect(_policy(softmax=True), torch.randn(8, 4), loss_fn)
    (found,) = [f for f in report.findings if f.rule == "GS432"]
    assert "log_softmax(z)" in found.advice
    plain = gradscope.inspect(_policy(softmax=False), torch.randn(8, 4), loss_fn)
    assert "GS432" not in {f.rule for f in plain.findings}
