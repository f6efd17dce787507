"""A buffer accumulated in the forward without torch.no_grad(): SNGP's Laplace precision
matrix `precision = m * precision + phi.T @ phi` (or an in-place add_) chains every step's
graph to the one before, and no backward reads it, so no backward fails: the run went
clean while its memory grew with every step. Named now by the buffer; the same update
under torch.no_grad(), a buffer re-made from each step's forward alone and one made once
before the loop with a graph stay silent."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


class _GPHead(torch.nn.Module):
    """Random features of a linear trunk and a linear output; `write` says how the buffer
    `precision` is written each forward: "assign" or "inplace" (accumulated with grad mode
    on), "guarded" (accumulated under torch.no_grad()), "remade" (this step's phi.T @ phi
    alone, with its graph); "once" leaves it as made before the loop."""

    def __init__(self, write: str) -> None:
        super().__init__()
        self.write = write
        self.trunk = torch.nn.Linear(2, 8)
        self.out = torch.nn.Linear(8, 2, bias=False)
        self.register_buffer("precision", torch.eye(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        phi = torch.cos(self.trunk(x))
        if self.write == "assign":
            self.precision = 0.999 * self.precision + phi.t() @ phi
        elif self.write == "inplace":
            self.precision.mul_(0.999).add_(phi.t() @ phi)
        elif self.write == "guarded":
            with torch.no_grad():
                self.precision = 0.999 * self.precision + phi.t() @ phi
        elif self.write == "remade":
            self.precision = phi.t() @ phi
        return self.out(phi)


def _run(write: str):
    torch.manual_seed(0)
    model = _GPHead(write)
    if write == "once":
        model.precision = model.trunk.weight.t() @ model.trunk.weight
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(16, 2), torch.randint(0, 2, (16,))
    with gradscope.watch() as w:
        for _epoch in range(2):
            if write != "once":
                model.precision = torch.eye(8)
            for _ in range(3):
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    return w.report


@pytest.mark.parametrize("write", ["assign", "inplace"])
def test_a_buffer_accumulated_with_autograd_on_is_named(write):
    (f,) = [f for f in _run(write).findings if f.rule == "GS476"]
    assert f.severity == Severity.WARNING and f.steps == (3,)
    assert "precision" in f.message and "torch.no_grad()" in f.advice


@pytest.mark.parametrize("write", ["guarded", "remade", "once"])
def test_a_buffer_that_spans_no_two_steps_is_silent(write):
    findings = _run(write).findings
    assert not [f for f in findings if f.severity != Severity.INFO]
