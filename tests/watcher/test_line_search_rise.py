"""LBFGS with line_search_fn='strong_wolfe' ends each step where the closure's loss is no
higher than where the step began, whatever lr. A loss that rose between its steps came
from what the script changed between them: here the output layer's coefficients rewritten
scaled (a KAN grid update that re-fits the spline coefficients and writes them where a
scale multiplies them again). The watch said lr-too-high (GS419) with an early blow-up
(GS414) "a consequence" of it: lowering lr changes nothing there. Named now as a rise from
between the steps; the same rewrite under LBFGS without a line search, whose lr does size
the step, keeps GS419's advice, and the run without the rewrite is silent."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


def _fit(line_search: str | None, rewrite: float) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x = torch.rand(128, 2) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * x[:, 1:]
    opt = torch.optim.LBFGS(net.parameters(), line_search_fn=line_search, max_iter=5)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        return loss

    with gradscope.watch() as w:
        for step in range(12):
            if step == 5:
                with torch.no_grad():
                    net[2].weight.mul_(rewrite)
            opt.step(closure)
    return [f for f in w.report.findings if f.severity >= Severity.WARNING]


def test_a_rise_under_a_line_search_is_named_as_coming_from_between_the_steps():
    findings = _fit("strong_wolfe", 20.0)
    assert "GS419" not in {f.rule for f in findings}
    (f,) = [f for f in findings if f.rule == "GS414"]
    assert f.advice.startswith("look at what changed before step 6"), f.advice
    assert "LBFGS's line search" in f.advice and "lower the learning rate" not in f.advice


@pytest.mark.parametrize("rewrite", [5.0, 20.0])
def test_without_a_line_search_the_step_size_advice_stays(rewrite):
    rules = {f.rule: f for f in _fit(None, rewrite)}
    assert rules["GS419"].advice.startswith("LBFGS without a line search steps lr")


def test_the_line_searched_fit_without_the_rewrite_is_silent():
    assert _fit("strong_wolfe", 1.0) == []
