"""A block trained by a rule of the script's own beside a backprop model (evolution
strategies on a gate read through a hard threshold, so no backward reaches it): GS411's
information says what moved it without calling it a target or EMA copy. A true copy
(same names below another module, same shapes) is still named one
(tests/rules/test_rules_objectives.py, tests/watcher/test_watch_rl.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope

X = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
Y = X.sum(1, keepdim=True)


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(4, 4)
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x * (self.gate(x) > 0).float() + x)


@torch.no_grad()
def _es_step(net: Gated, sigma: float = 0.05) -> None:
    """One antithetic evolution-strategies step on the gate, by hand."""
    gate = list(net.gate.parameters())
    noise = [torch.randn_like(p) for p in gate]
    scores = []
    for sign in (1.0, -1.0):
        for p, z in zip(gate, noise, strict=True):
            p.add_(z, alpha=sigma * sign)
        scores.append(float(F.mse_loss(net(X), Y)))
        for p, z in zip(gate, noise, strict=True):
            p.sub_(z, alpha=sigma * sign)
    for p, z in zip(gate, noise, strict=True):
        p.add_(z, alpha=-(scores[0] - scores[1]) / (2 * sigma) - 0.01)


def test_a_block_moved_by_a_gradient_free_rule_is_not_called_a_copy():
    torch.manual_seed(0)
    net = Gated()
    opt = torch.optim.Adam(net.body.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(6):
            opt.zero_grad()
            F.mse_loss(net(X), Y).backward()
            opt.step()
            _es_step(net)
    found = [f for f in w.report.findings if f.rule == "GS411"]
    assert {f.subject for f in found} == {"gate.weight", "gate.bias"}
    for f in found:
        assert "its values changed" in f.message and "evolution strategies" in f.message
        assert "updated by copy" not in f.message and "a copy is not trained" not in f.advice
