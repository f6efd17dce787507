"""Interval bound propagation (Gowal et al.) as its reference code trains it: the loss mixes
the natural cross-entropy with the cross-entropy of the worst-case logits, the verified term
weighted 0 until epsilon starts ramping, its weight then rising while epsilon grows, so the
loss rises by design. GS414 read two cross-entropies as one objective and called the rise an
early blow-up that never recovered (an error, "lower the learning rate")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


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


def _ibp_findings(eps_max: float = 0.3, steps: int = 60) -> list[str]:
    torch.manual_seed(0)
    x_all = torch.rand(256, 24)
    y_all = (x_all @ torch.randn(24, 4)).argmax(1)
    model = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    with gradscope.watch() as w:
        for step in range(steps):
            idx = torch.randint(0, 256, (64,))
            x, y = x_all[idx], y_all[idx]
            ramp = min(max(step - 5, 0) / 30, 1.0)
            eps, kappa = eps_max * ramp, 1.0 - ramp
            lo, hi = _bounds(model, (x - eps).clamp(0, 1), (x + eps).clamp(0, 1))
            worst = torch.where(F.one_hot(y, 4).bool(), lo, hi)
            loss = kappa * F.cross_entropy(model(x), y) + (1 - kappa) * F.cross_entropy(worst, y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
    return [f.rule for f in w.report.findings if f.severity >= gradscope.Severity.WARNING]


def test_a_verified_loss_ramped_in_from_weight_zero_is_no_blowup():
    assert _ibp_findings() == []
