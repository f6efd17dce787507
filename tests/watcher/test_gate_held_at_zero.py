"""A tanh gate initialised at 0 (Flamingo's gated cross-attention) left out of the
optimizer stays 0: the branch it multiplies gets only zero gradients (GS413), a
consequence of the gate's place (GS411) that says so. A branch cut from the loss beside
it (gradients None) is not the gate's doing; with the gate in the optimizer all learn."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradscope import api


class Gated(nn.Module):
    def __init__(self, gate: float = 0.0, cut: bool = False) -> None:
        super().__init__()
        self.trunk = nn.Linear(8, 8)
        self.branch = nn.Linear(8, 8)
        self.gate = nn.Parameter(torch.full((1,), gate))
        self.side = nn.Linear(8, 8) if cut else None
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.trunk(x))
        h = h + self.gate.tanh() * self.branch(h)
        if self.side is not None:
            h = h + self.side(h).detach()  # the side layer's graph cut
        return self.head(h)


def _findings(model: Gated, gate_in_optimizer: bool) -> list:
    params = [p for n, p in model.named_parameters() if gate_in_optimizer or n != "gate"]
    opt = torch.optim.AdamW(params, lr=1e-3)
    g = torch.Generator().manual_seed(0)
    with api.watch() as w:
        for _ in range(3):
            x = torch.randn(16, 8, generator=g)
            loss = F.cross_entropy(model(x), torch.randint(0, 3, (16,), generator=g))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return list(w.report.findings)


def test_what_a_gate_held_at_zero_multiplies_is_its_consequence():
    torch.manual_seed(0)
    found = _findings(Gated(cut=True), gate_in_optimizer=False)
    by = {(f.rule, f.subject): f for f in found}
    assert ("GS411", "gate") in by
    for name in ("branch.weight", "branch.bias"):
        f = by[("GS413", name)]
        assert f.explained_by == "GS411:gate" and "not-in-optimizer (GS411)" in f.advice
    side = by[("GS413", "side.weight")]  # None: cut from the loss, not behind the gate
    assert side.explained_by is None


def test_a_gate_that_started_away_from_zero_explains_nothing():
    torch.manual_seed(0)
    found = _findings(Gated(gate=0.5), gate_in_optimizer=False)
    assert {f.rule for f in found} == {"GS411"}


def test_a_gate_at_zero_in_the_optimizer_is_silent():
    torch.manual_seed(0)
    found = _findings(Gated(), gate_in_optimizer=True)
    assert not [f for f in found if f.severity >= f.severity.WARNING], found
