"""A policy whose network ends in a softmax, handed to `Categorical(logits=...)` (tianshou's
default `dist_fn` on a softmax actor, skrl's `unnormalized_log_prob=True` on one): the
distribution normalises the probabilities again, x - logsumexp(x), so no action's
probability can pass e/(e + C - 1) (0.73 of 2). The policy-gradient loss is no loss gradscope
reads, so it went unnamed (or only its symptom, GS405); now GS431 in watch and GS432 in
inspect name it from the graph. Raw logits, `Categorical(probs=...)` and a log_softmax by
hand over logits are right."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.distributions import Categorical

import gradscope


def _policy(softmax: bool) -> nn.Sequential:
    torch.manual_seed(0)
    head = [nn.Softmax(dim=-1)] if softmax else []
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2), *head)


def _log_prob(out: torch.Tensor, act: torch.Tensor, how: str) -> torch.Tensor:
    if how == "probs":
        return Categorical(probs=out).log_prob(act)
    if how == "by-hand":  # log_softmax written out: x - logsumexp(x)
        return (out - out.logsumexp(-1, keepdim=True)).gather(-1, act[:, None]).squeeze(-1)
    return Categorical(logits=out).log_prob(act)


def _reinforce(softmax: bool, how: str = "logits", steps: int = 6) -> set[str]:
    """REINFORCE on a one-step bandit: the action that matches the observation's sign pays 1."""
    policy = _policy(softmax)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(steps):
            obs = torch.randn(32, 4)
            out = policy(obs)
            act = torch.distributions.Categorical(logits=out.detach()).sample()
            adv = (act == (obs[:, 0] > 0).long()).float()
            loss = -(_log_prob(out, act, how) * (adv - adv.mean())).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule for f in w.report.findings}


@pytest.mark.parametrize("how", ["logits", "by-hand"])
def test_a_softmax_normalised_again_as_logits_is_named(how):
    assert "GS431" in _reinforce(softmax=True, how=how)


@pytest.mark.parametrize(
    ("softmax", "how"), [(False, "logits"), (True, "probs"), (False, "by-hand")]
)
def test_logits_probabilities_as_probs_and_a_log_softmax_by_hand_are_right(softmax, how):
    assert "GS431" not in _reinforce(softmax=softmax, how=how)


def test_inspect_names_it_too():
    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        act = torch.arange(out.shape[0]) % 2
        return -(Categorical(logits=out).log_prob(act) * torch.linspace(-1, 1, 8)).mean()

    report = gradscope.inspect(_policy(softmax=True), torch.randn(8, 4), loss_fn)
    (found,) = [f for f in report.findings if f.rule == "GS432"]
    assert "Categorical(probs=p)" in found.advice
    plain = gradscope.inspect(_policy(softmax=False), torch.randn(8, 4), loss_fn)
    assert "GS432" not in {f.rule for f in plain.findings}
