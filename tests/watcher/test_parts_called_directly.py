"""A trained model whose own forward is never called: skrl's `Model.act` calls `compute`,
which runs the model's layers, and SB3's `action_log_prob` runs its actor's parts. Its
forwards without gradients (an agent acting, a TD target from its own predictions) are seen
at its parts, so a critic's TD loss is read as a moving target's (a false GS402 warning on
skrl's SAC in some seeds). A model that runs a part without gradients inside its own forward
(an encoder frozen by no_grad for a while) is no such model."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


class Critic(nn.Module):
    """skrl's shape: the layers are called from `compute`, never through `forward`."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))

    def compute(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


class FrozenForAWhile(nn.Module):
    """A probe whose encoder runs without gradients inside its own forward (its parameters
    are in the optimizer, to be unfrozen later)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(4, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            feats = self.encoder(obs)
        return self.head(feats.tanh())


def _watched(model: nn.Module, td_target: bool, steps: int = 8):
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    run = model.compute if isinstance(model, Critic) else model
    with gradscope.watch() as w:
        for _ in range(steps):
            obs, nxt, reward = torch.randn(32, 4), torch.randn(32, 4), torch.randn(32, 1)
            if td_target:
                with torch.no_grad():
                    target = reward + 0.9 * run(nxt)
            else:
                target = reward
            loss = F.mse_loss(run(obs), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.run.state_facts.no_grad_steps


def test_a_model_run_by_its_parts_without_gradients_is_seen():
    assert _watched(Critic(), td_target=True) >= 7


def test_a_part_frozen_inside_the_models_own_forward_is_not_a_forward_without_gradients():
    assert _watched(FrozenForAWhile(), td_target=False) == 0
    assert _watched(Critic(), td_target=False) == 0
