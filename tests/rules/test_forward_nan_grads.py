"""Gradients made non-finite by a non-finite loss: the forward made the NaN/Inf and the
backward carried it. GS103 told the user a backward formula divided by zero and to clip
gradients (a selective scan whose step was not passed through softplus overflowed in its
recurrence: clipping cannot help). Where the loss is finite and the backward made the NaN,
the backward advice stays."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradscope.api.inspecting import inspect


class Recurrence(nn.Module):
    """h = a·h + x over the sequence: a factor above 1 overflows float32 in the forward."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 4)
        self.a = nn.Parameter(torch.full((4,), factor))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.inp(x)
        h = torch.zeros(x.shape[0], 4)
        for t in range(x.shape[1]):
            h = self.a * h + u[:, t]
        return h


class LogAtZero(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.relu(self.inp(x)) * 0)


class SqrtAtZero(nn.Module):
    """A finite loss whose backward divides by zero: sqrt of exactly 0."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(self.inp(x) * 0)


X = torch.randn(8, 100, 4, generator=torch.Generator().manual_seed(0))


def _grad_advice(model: nn.Module) -> list[str]:
    report = inspect(model, X, lambda out: out.pow(2).mean())
    found = [f.advice for f in report.findings if f.slug == "non-finite-grad"]
    assert found, report.findings
    return found


@pytest.mark.parametrize("model", [lambda: Recurrence(3.0), LogAtZero], ids=["overflow", "log0"])
def test_gradients_of_a_non_finite_loss_are_sent_to_the_forward(model):
    torch.manual_seed(0)
    for advice in _grad_advice(model()):
        assert "the forward made the non-finite value" in advice, advice
        assert "a backward formula" not in advice


def test_a_backward_that_divides_by_zero_keeps_its_advice():
    torch.manual_seed(0)
    for advice in _grad_advice(SqrtAtZero()):
        assert "a backward formula divides by zero" in advice, advice
