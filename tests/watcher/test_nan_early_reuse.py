"""The early NaN flag of a CPU step reads nothing the gradient norms did not read as they
were taken: a healthy step adds no sum and no read of its own; a step whose norms were
suspect (NaN, inf, zero) or not all there is still judged by its one sum."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import gradscope
from gradscope.watcher import nan_probe


def _sums(monkeypatch) -> list[bool]:
    """Each early flag's own read: whether the step was read again (True) or known."""
    reads: list[bool] = []
    original = nan_probe.early

    def early(probe, recorder, step, finite=False):
        before = probe.hurried
        reads.append(not finite and not probe.done and probe.seen is None and not before)
        return original(probe, recorder, step, finite)

    monkeypatch.setattr(nan_probe, "early", early)
    return reads


def _loop(model: nn.Module, steps: int, skip: str = "") -> object:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 4)
    with gradscope.watch() as w:
        for _ in range(steps):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            if skip:
                getattr(model, skip).weight.grad = None
            opt.step()
    return w


@pytest.mark.parametrize("steps", [3, 12, 40])
def test_healthy_cpu_steps_are_not_read_twice(steps, monkeypatch):
    reads = _sums(monkeypatch)
    torch.manual_seed(0)
    w = _loop(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), steps)
    assert len(reads) == steps and not any(reads)
    assert len(w.run.steps) == steps


def test_a_step_with_a_gradient_missing_is_still_summed(monkeypatch):
    """A tensor without a gradient (-1 in its slot): the vector is not the fused norm's
    own, so the flag takes its sum as before."""
    reads = _sums(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("a", nn.Linear(4, 8))
    model.add_module("b", nn.Linear(8, 1))
    _loop(model, 4, skip="a")
    assert reads and all(reads)


@pytest.mark.parametrize("at", [1, 2, 5])
def test_a_nan_gradient_under_a_finite_loss_still_hurries_the_read_back(at):
    """The gradients turn NaN at step `at` (a NaN multiplier applied after the loss was
    taken would make the loss NaN too, so the NaN enters through a backward hook): the
    step's norms are suspect, summed, and the recorder reads back at once."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    state = {"step": 0}

    def poison(grad: torch.Tensor) -> torch.Tensor:
        return grad * math.nan if state["step"] == at else grad

    model[0].weight.register_hook(poison)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(8, 4)
    with gradscope.watch() as w:
        for s in range(1, at + 3):
            state["step"] = s
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            if s == at:
                assert w.state.probe.hurried  # asked at this step's record
    norms = [r.param_norms[0] for r in w.run.steps]
    assert norms[at - 1] is not None and math.isnan(norms[at - 1])
