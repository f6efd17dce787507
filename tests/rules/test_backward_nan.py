"""inspect names the backward op that made a non-finite gradient from finite ones while the
forward stayed finite (a sqrt or pow at 0, acos at 1, a log a mask dropped), with its line,
told apart from the nodes that only passed it on; a masked log made safe is said nothing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradscope.api.inspecting import inspect

torch.manual_seed(0)
X = torch.randn(16, 8)
X[:4] = 0  # padding rows: the layer's output there is exactly 0
KEEP = X.abs().sum(-1) > 0


class Masked(nn.Module):
    def __init__(self, case: str) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8, bias=False)
        self.case = case

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        if self.case == "sqrt":
            return torch.sqrt(h.pow(2).sum(-1))  # a norm at 0
        if self.case == "acos":
            return torch.acos(torch.tanh(h) * 0 + 1)  # acos at 1
        if self.case == "where-log":
            return torch.where(KEEP[:, None], torch.log(h.abs()), 0.0)
        if self.case == "mask-pow":
            return KEEP * h.pow(2).sum(-1).pow(0.5)
        safe = torch.where(KEEP[:, None], h.abs(), 1.0)
        return torch.where(KEEP[:, None], torch.log(safe), 0.0)


@pytest.mark.parametrize(
    ("case", "op", "masked"),
    [
        ("sqrt", "SqrtBackward0", False),
        ("acos", "AcosBackward0", False),
        ("where-log", "LogBackward0", True),
        ("mask-pow", "PowBackward0", True),
    ],
)
def test_the_backward_op_that_made_the_nan_is_named_with_its_line(case, op, masked):
    report = inspect(Masked(case), X, lambda out: out.sum())
    found = [f for f in report.findings if f.slug == "non-finite-grad"]
    assert found, report.findings
    text = " ".join(found[0].evidence)
    assert f"({op}) made the first non-finite gradient from finite ones" in text, text
    assert "test_backward_nan.py:" in text and "only passed it on" in text
    assert ("masked out" in text) == masked
    assert found[0].row.key == "domain"


def test_a_masked_log_made_safe_with_where_is_said_nothing():
    report = inspect(Masked("safe"), X, lambda out: out.sum())
    assert [f.rule for f in report.findings if "non-finite" in f.slug] == []
