"""GS440 on test-time adaptation that starts each test point again from the source weights
(MEMO, TTT): the model in eval mode on purpose (its BatchNorms keep the source statistics, as
a batch of one point's augmentations would give degenerate ones) and its weights loaded back
between steps. That reset, told by the weights' fingerprints returning to those of the first
step's start, makes the mode information. The same adaptation without the reset (TENT left
in eval, a fine-tune in eval) is still a warning, and weights written in place that do not
return to the first step's values (a clamp) are no reset."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from gradscope import api
from gradscope.findings import Severity
from gradscope.watcher.hand_moved import HandMoved


def _net() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3),
    )  # fmt: skip
    with torch.no_grad():  # source statistics, measured before adapting
        for _ in range(3):
            net(torch.randn(8, 3, 6, 6))
    return net


def _marginal_entropy(logits: torch.Tensor) -> torch.Tensor:
    avg = logits.log_softmax(1).logsumexp(0) - torch.log(torch.tensor(float(len(logits))))
    return -(avg * avg.exp()).sum()


def _gs440(points: int, steps_per_point: int, reset: bool):
    net = _net()
    source = copy.deepcopy(net.state_dict())
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    with api.watch() as w:
        for _ in range(points):
            if reset:
                net.load_state_dict(source)
            net.eval()
            x = torch.randn(1, 3, 6, 6) + 0.5
            for _ in range(steps_per_point):
                views = x + 0.1 * torch.randn(6, 3, 6, 6)  # augmentations of one point
                opt.zero_grad()
                _marginal_entropy(net(views)).backward()
                opt.step()
    return [f for f in w.report.findings if f.rule == "GS440"]


@pytest.mark.parametrize("steps_per_point", [1, 2])
def test_eval_mode_with_an_episodic_reset_is_information(steps_per_point):
    (found,) = _gs440(points=4, steps_per_point=steps_per_point, reset=True)
    assert found.severity is Severity.INFO, found
    assert "episodic reset" in found.message


def test_eval_mode_without_the_reset_is_still_a_warning():
    (found,) = _gs440(points=4, steps_per_point=1, reset=False)
    assert found.severity is Severity.WARNING, found


def test_only_writes_back_to_the_first_steps_values_are_resets():
    weights, clamped = nn.Linear(3, 3), nn.Linear(3, 3)
    params = [*weights.parameters(), *clamped.parameters()]
    opt = SimpleNamespace(param_groups=[{"params": params}])  # what HandMoved reads of one
    index = {id(p): i for i, p in enumerate(params)}
    source = copy.deepcopy(weights.state_dict())
    moved = HandMoved()
    for step in (1, 2, 3):
        moved.before_step(opt, index)
        (weights(torch.ones(3)).sum() + clamped(torch.ones(3)).sum()).backward()
        with torch.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
        moved.after_step(opt, step)
        weights.load_state_dict(source)  # the episodic reset
        with torch.no_grad():
            clamped.weight.clamp_(-0.1, 0.1)  # written in place, never back to the start
    moved.before_step(opt, index)
    assert moved.put_back() == (0, 1)
