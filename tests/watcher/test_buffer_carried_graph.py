"""A buffer written from a tensor with a graph while grad mode is on: a KAN layer's grid
re-fitted inside the training forward (efficient-kan's update_grid without its
@torch.no_grad()), or a running mean updated by hand in place and read by the next
forward. The buffer carries the step's graph into the next one, whose backward dies on
it, and GS459 told the user to detach an RNN's hidden state. Named now by the buffer,
with torch.no_grad() as the fix; the same writes under torch.no_grad() are silent, and a
hidden state carried with no buffer involved keeps its own advice."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


class _Adaptive(torch.nn.Module):
    """Features relu(x - knot) on knots kept in a buffer; `write` says how the buffer is
    updated from the batch each step: "grid" (copy_ of the input's quantiles, a KAN grid
    update) or "running" (an in-place moving average of the input's mean, read back by
    the forward as a centring)."""

    def __init__(self, write: str) -> None:
        super().__init__()
        self.write = write
        self.register_buffer("knots", torch.linspace(-1, 1, 4))
        self.weight = torch.nn.Parameter(torch.randn(3, 12) * 0.3)

    def refit(self, x: torch.Tensor) -> None:
        if self.write == "grid":
            self.knots.copy_(torch.quantile(x.flatten(), torch.linspace(0.1, 0.9, 4)))
        else:
            self.knots.mul_(0.9).add_(0.1 * x.mean())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = F.relu(x.unsqueeze(-1) - self.knots).flatten(1)
        return F.linear(features, self.weight)


def _run(write: str, guarded: bool):
    torch.manual_seed(0)
    first, second = torch.nn.Linear(2, 3), _Adaptive(write)
    model = torch.nn.Sequential(first, second)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(16, 2), torch.randn(16, 3)
    with gradscope.watch() as w:
        for _ in range(4):
            hidden = first(x)
            if guarded:
                with torch.no_grad():
                    second.refit(hidden)
            else:
                second.refit(hidden)
            loss = F.mse_loss(second(hidden), y)
            opt.zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                break
            opt.step()
    return w.report


@pytest.mark.parametrize("write", ["grid", "running"])
def test_a_buffer_written_with_autograd_on_is_named_as_the_carrier(write):
    (f,) = [f for f in _run(write, guarded=False).findings if f.rule == "GS459"]
    assert f.severity == Severity.ERROR and f.steps == (2,)
    assert "buffer 1.knots" in f.message
    assert "torch.no_grad()" in f.advice and "h.detach()" not in f.advice


@pytest.mark.parametrize("write", ["grid", "running"])
def test_the_same_buffer_written_under_no_grad_is_silent(write):
    findings = _run(write, guarded=True).findings
    assert not [f for f in findings if f.severity != Severity.INFO]
