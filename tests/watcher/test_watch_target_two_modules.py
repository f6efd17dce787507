"""GS447 on a target network kept as two modules (QMIX's target agent and target mixer, an
encoder and a head): no module holds the whole copy, so the finding names the modules it
lies in, the copy's and the model's, rather than "its copy" and "model". The target done
right (no_grad, out of the optimizer) stays quiet."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 16)
        self.out = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.fc(x)))


class Mixer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hyper = nn.Linear(8, 3)

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return (q * torch.abs(self.hyper(state))).sum(-1)


def _qmix(target_trained: bool, steps: int = 60, sync_every: int = 25):
    """A monotonic mixer over one agent's chosen Q, bootstrapped from target copies of the
    agent and the mixer, loaded from them every `sync_every` steps."""
    torch.manual_seed(0)
    agent, mixer = Agent(), Mixer()
    target_agent, target_mixer = copy.deepcopy(agent), copy.deepcopy(mixer)
    params = [*agent.parameters(), *mixer.parameters()]
    if target_trained:
        params += [*target_agent.parameters(), *target_mixer.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    with gradscope.watch() as w:
        for step in range(1, steps + 1):
            s, s2, st, st2 = (
                torch.randn(16, 6),
                torch.randn(16, 6),
                torch.randn(16, 8),
                torch.randn(16, 8),
            )
            a, r = torch.randint(0, 3, (16, 1)), torch.randn(16)
            with torch.set_grad_enabled(target_trained):
                y = r + 0.9 * target_mixer(target_agent(s2), st2)
            chosen = agent(s).gather(1, a).expand(-1, 3)
            loss = F.mse_loss(mixer(chosen, st), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % sync_every == 0:
                target_agent.load_state_dict(agent.state_dict())
                target_mixer.load_state_dict(mixer.state_dict())
    assert not w.report.faults
    return [f for f in w.report.findings if f.rule == "GS447"]


def test_a_target_of_two_modules_is_named_by_its_modules():
    (found,) = _qmix(target_trained=True)
    assert "its copy" not in found.message and "of model " not in found.message, found.message
    copy_side, _, model_side = found.message.partition(" is a copy of ")
    assert copy_side.count("Agent") == 1 and copy_side.count("Mixer") == 1, found.message
    assert "Agent" in model_side and "Mixer" in model_side, found.message
    assert found.subject == copy_side
    assert f"requires_grad_(False) on {copy_side}" in found.advice, found.advice


def test_a_target_of_two_modules_under_no_grad_stays_quiet():
    assert _qmix(target_trained=False) == []
