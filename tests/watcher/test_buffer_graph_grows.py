"""A buffer accumulated in the forward without torch.no_grad(): SNGP's Laplace precision
matrix `precision = m * precision + phi.T @ phi` (or an in-place add_) chains every step's
graph to the one before, and no backward reads it, so no backward fails: the run went
clean while its memory grew with every step. Named now by the buffer; the same update
under torch.no_grad(), a buffer re-made from each step's forward alone and one made once
before the loop with a graph stay silent. So does another running statistic written the
same way (a feature mean kept by hand) and state the loss itself reads back across steps
on purpose (retain_graph=True, detached every few steps)."""

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


class _Carried(torch.nn.Module):
    """A linear layer with a buffer `state` written each forward from its last value and the
    batch's features with grad mode on: `reads` says whether the output reads it back."""

    def __init__(self, reads: bool) -> None:
        super().__init__()
        self.reads = reads
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("state", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        self.state = 0.9 * self.state + 0.1 * h.mean(0)
        return h + self.state if self.reads else h


def _carried_run(reads: bool):
    torch.manual_seed(0)
    model = _Carried(reads)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    with gradscope.watch() as w:
        for step in range(6):
            if step % 3 == 0:
                model.state = model.state.detach()
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward(retain_graph=reads)
            opt.step()
    return w.report


def test_a_running_statistic_kept_by_hand_with_autograd_on_is_named():
    (f,) = [f for f in _carried_run(reads=False).findings if f.rule == "GS476"]
    assert "state" in f.message and f.steps == (3,)


def test_state_the_loss_reads_back_on_purpose_is_not_this():
    assert not [f for f in _carried_run(reads=True).findings if f.rule == "GS476"]
