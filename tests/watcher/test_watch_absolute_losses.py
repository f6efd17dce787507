"""Absolute-error losses read from their graph (domain_scripts/forecasting.py): torch leaves
no node of its own for F.l1_loss (abs, then a mean), nor for a pinball loss written as
max((q - 1)·e, q·e) or as GluonTS's |·|; read as losses bounded below by 0, a forecaster's
MAE or quantile loss with its sign flipped is named as maximised, while the same losses
minimised stay silent and a maximum of factors of one sign, or a ReLU, stays unknown."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gradscope.findings import Severity
from gradscope.watcher import loss_graph
from tests.watcher.watch_scripts import domain_watched

Q = torch.tensor([0.1, 0.5, 0.9])


def _kind(loss: torch.Tensor) -> str:
    return loss_graph.read(loss).describe()


def test_absolute_errors_and_pinball_losses_are_read_bounded_below():
    pred, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3)
    e = y - pred
    assert _kind(F.l1_loss(pred, y)) == "l1 (mean)"
    assert _kind(-(pred - y).abs().sum() / 4) == "-l1 (sum) × 0.25"
    assert _kind(torch.max((Q - 1) * e, Q * e).mean()) == "pinball (mean)"
    assert _kind(torch.max(0.9 * e, -0.1 * e).sum(-1).mean()) == "pinball (sum)"
    assert loss_graph.read(F.l1_loss(pred, y) + F.mse_loss(pred, y)).lower_bound() == 0.0


def test_a_maximum_of_one_signed_factors_or_a_relu_stays_unknown():
    pred, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3)
    e = y - pred
    assert not loss_graph.read(torch.max(Q * e, (Q + 1) * e).mean()).terms
    assert not loss_graph.read(torch.max(e, -pred).mean()).terms
    assert not loss_graph.read(F.relu(e).mean()).terms


@pytest.mark.parametrize("mode", ["mae", "pinball", "gluon"])
def test_a_forecasters_absolute_loss_minimised_is_silent(mode):
    report = domain_watched("forecasting.py", mode)
    assert not report.faults, report.internal_error()
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


@pytest.mark.parametrize("mode", ["mae-negated", "pinball-negated", "gluon-negated"])
def test_a_forecasters_absolute_loss_negated_is_named_maximised(mode):
    report = domain_watched("forecasting.py", mode)
    assert [f.rule for f in report.findings] == ["GS418"], report.findings
    assert "remove the minus sign" in report.findings[0].advice
