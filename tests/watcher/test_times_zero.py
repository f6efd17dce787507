"""A weight multiplied by a constant 0: brevitas's runtime-stats scaling writes
`stats + 0. * self.value` for its first collect_stats_steps (300) training forwards, so that
the learned scale's gradient is 0, not None, until it is initialised from the statistics.
A QAT run shorter than that got W GS413 "only zero gradients", blamed on the clamp's
custom Function above it. Written by an installed library it is now information naming the
product with 0; written by the script (a term switched off, meant or not) it stays a
warning, naming the product. A factor that is not a constant 0 lets the scale learn."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.autograd_walk import TIMES_ZERO, flat_op
from gradscope.findings import Severity
from gradscope.inspector import flat_off
from tests.watcher.watch_scripts import imported_from

SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn


    class ClampMinSte(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clamp_min(1e-8)

        @staticmethod
        def backward(ctx, grad):
            return grad


    class StatsScaled(nn.Module):
        '''A ReLU quantised at a scale from its input's statistics while it collects them,
        `factor` times the learned value added (brevitas adds 0.).'''

        def __init__(self, factor):
            super().__init__()
            self.value = nn.Parameter(torch.ones(()))
            self.factor = factor

        def forward(self, x):
            stats = x.detach().abs().amax()
            scale = ClampMinSte.apply(stats + self.factor * self.value) / 7
            levels = (F.relu(x) / scale).clamp(0, 7)
            return (levels + (levels.round() - levels).detach()) * scale
    """
)


def _model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factor: float, installed: bool):
    name = f"qlib_{'installed' if installed else 'own'}"
    scaled = imported_from(tmp_path, monkeypatch, SOURCE, name, installed).StatsScaled
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), scaled(factor), nn.Linear(16, 3))


def _gs413(model: nn.Module) -> list[gradscope.Finding]:
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(6):
            x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_librarys_scale_multiplied_by_a_constant_0_is_information(tmp_path, monkeypatch):
    (f,) = _gs413(_model(tmp_path, monkeypatch, 0.0, installed=True))
    assert f.subject == "1.value" and f.severity == Severity.INFO
    assert TIMES_ZERO in f.message and "qlib_installed.StatsScaled writes it so" in f.message


def test_the_scripts_own_product_with_0_stays_a_warning_naming_it(tmp_path, monkeypatch):
    (f,) = _gs413(_model(tmp_path, monkeypatch, 0.0, installed=False))
    assert f.subject == "1.value" and f.severity == Severity.WARNING
    assert TIMES_ZERO in f.message and "factor that is 0" in f.advice


def test_a_scale_with_a_factor_not_0_learns(tmp_path, monkeypatch):
    assert _gs413(_model(tmp_path, monkeypatch, 0.5, installed=True)) == []


def test_inspect_names_the_product_with_0_too(tmp_path, monkeypatch):
    model = _model(tmp_path, monkeypatch, 0.0, installed=False)
    loss = model(torch.randn(4, 8)).sum()
    assert dict(flat_off.names(model, loss)) == {"1.value": TIMES_ZERO}


@pytest.mark.parametrize("make", [lambda v: 0.0 * v, lambda v: v * 0, lambda v: torch.mul(v, 0.0)])
def test_the_product_with_0_is_read_either_way_round(make):
    v = torch.randn(3, requires_grad=True)
    assert flat_op(make(v).grad_fn) == TIMES_ZERO


def test_a_product_with_a_tensor_or_a_nonzero_number_is_no_such_product():
    v = torch.randn(3, requires_grad=True)
    for y in (v * 2.0, v * torch.zeros(3), v * torch.zeros((), requires_grad=True), v * v):
        assert flat_op(y.grad_fn) is None
