"""Population-Based Training in one process: the exploit step loads the best member's
weights and optimizer state (`load_state_dict`) into the worst, whose learning rate
rises to the best one's, moments included: no GS452 jump. The same rise set by hand on
the group, the moments left as they were (a copy of weights and lr only), still fires."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope

X = torch.randn(256, 8, generator=torch.Generator().manual_seed(1))
Y = X[:, :3].argmax(1)


def _member(opt_class, lr: float):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    return model, opt_class(model.parameters(), lr=lr)


def _train(member, steps: int = 20) -> None:
    model, opt = member
    for _ in range(steps):
        idx = torch.randint(0, 256, (32,))
        opt.zero_grad()
        F.cross_entropy(model(X[idx]), Y[idx]).backward()
        opt.step()


def _population(opt_class, exploit) -> list[tuple[str, str]]:
    torch.manual_seed(0)
    worst, best = _member(opt_class, 1e-3), _member(opt_class, 3e-2)
    with gradscope.watch() as w:
        for round_ in range(3):
            _train(worst)
            _train(best)
            if round_ == 0:
                exploit(worst, best)
    loud = [f for f in w.report.findings if f.severity >= gradscope.Severity.WARNING]
    return [(f.rule, f.subject) for f in loud]


def _load_both(worst, best) -> None:
    worst[0].load_state_dict(best[0].state_dict())
    worst[1].load_state_dict(best[1].state_dict())
    for group in worst[1].param_groups:
        group["lr"] *= 1.2  # explore


def _copy_weights_and_lr(worst, best) -> None:
    worst[0].load_state_dict(best[0].state_dict())
    for mine, theirs in zip(worst[1].param_groups, best[1].param_groups, strict=True):
        mine["lr"] = theirs["lr"] * 1.2


def test_an_exploit_that_loads_the_optimizer_state_is_no_lr_jump():
    assert _population(torch.optim.Adam, _load_both) == []
    assert _population(lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9), _load_both) == []


def test_the_lr_copied_by_hand_without_the_moments_still_fires():
    assert any(rule == "GS452" for rule, _ in _population(torch.optim.Adam, _copy_weights_and_lr))
