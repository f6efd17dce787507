"""Interval bound propagation (Gowal et al.) as its reference code trains it: the loss mixes
the natural cross-entropy with the cross-entropy of the worst-case logits, the verified term
weighted 0 until epsilon starts ramping, its weight then rising while epsilon grows, so the
loss rises by design. GS414 read two cross-entropies as one objective and called the rise an
early blow-up that never recovered (an error, "lower the learning rate")."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.watcher import interval_bounds


def _bounds(model: nn.Sequential, lo: torch.Tensor, hi: torch.Tensor) -> tuple:
    for m in model:
        if isinstance(m, nn.Linear):
            mid, rad = (
                F.linear((hi + lo) / 2, m.weight, m.bias),
                F.linear((hi - lo) / 2, m.weight.abs()),
            )
            lo, hi = mid - rad, mid + rad
        else:
            lo, hi = m(lo), m(hi)
    return lo, hi


def _ibp_findings(
    eps_max: float = 0.3, steps: int = 60, pure: bool = False, lr: float = 5e-4, ramped: bool = True
) -> list[str]:
    torch.manual_seed(0)
    x_all = torch.rand(256, 24)
    y_all = (x_all @ torch.randn(24, 4)).argmax(1)
    model = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with gradscope.watch() as w:
        for step in range(steps):
            idx = torch.randint(0, 256, (64,))
            x, y = x_all[idx], y_all[idx]
            ramp = min(max(step - 5, 0) / 30, 1.0) if ramped else 1.0
            eps, kappa = eps_max * ramp, 1.0 - ramp
            lo, hi = _bounds(model, (x - eps).clamp(0, 1), (x + eps).clamp(0, 1))
            worst = torch.where(F.one_hot(y, 4).bool(), lo, hi)
            loss = kappa * F.cross_entropy(model(x), y) + (1 - kappa) * F.cross_entropy(worst, y)
            if pure:  # the verified term alone: the box's radius is what ramps
                loss = F.cross_entropy(worst, y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
    return [f.rule for f in w.report.findings if f.severity >= gradscope.Severity.WARNING]


def test_a_verified_loss_ramped_in_from_weight_zero_is_no_blowup():
    assert _ibp_findings() == []


def test_the_verified_loss_alone_on_an_epsilon_ramp_is_no_blowup():
    """No weight ramps here: the box's radius, 0 for the first steps, does (interval_bounds)."""
    assert _ibp_findings(pure=True) == []


def test_a_box_of_constant_radius_is_judged_as_one_objective():
    assert "GS419" in _ibp_findings(pure=True, ramped=False, lr=0.05)


def test_the_radius_is_read_only_where_w_carries_the_centre_too():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = torch.rand(4, 6), torch.tensor([0, 1, 2, 0])
    lo, hi = _bounds(model, (x - 0.25).clamp(0, 1), (x + 0.25).clamp(0, 1))
    bound = F.cross_entropy(torch.where(F.one_hot(y, 3).bool(), lo, hi), y)
    assert interval_bounds.radius(bound.grad_fn) == pytest.approx(0.25, abs=1e-6)
    monotone = F.linear(x, model[0].weight.abs(), model[0].bias)  # non-negative weights
    assert interval_bounds.radius(F.cross_entropy(monotone, y % 3).grad_fn) is None
