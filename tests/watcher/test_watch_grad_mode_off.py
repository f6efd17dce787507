"""A backward that fails because an evaluation left grad mode off (GS461): the script called
torch.set_grad_enabled(False) for its evaluation and only model.train() after it. The same
crash from a loss computed inside a `with torch.no_grad():` block (grad mode back on at the
backward) is not named so. An evaluation's forces (-dE/dx by torch.autograd.grad) taken inside
torch.no_grad() fail the same way in autograd.grad: named, with torch.enable_grad() as the fix."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _crashed(how: str):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with pytest.raises(RuntimeError, match="does not require grad"), gradscope.watch() as w:
        for step in range(1, 21):
            x = torch.randn(16, 6)
            if how == "no_grad block" and step == 11:
                with torch.no_grad():
                    loss = F.cross_entropy(model(x), x[:, :3].argmax(1))
            else:
                loss = F.cross_entropy(model(x), x[:, :3].argmax(1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if how == "left off" and step == 10:
                model.eval()
                torch.set_grad_enabled(False)
                model(torch.randn(32, 6))
                model.train()
    torch.set_grad_enabled(True)
    return w.report.findings


def test_grad_mode_left_off_after_an_evaluation_is_named():
    (found,) = [f for f in _crashed("left off") if f.rule == "GS461"]
    assert found.steps == (11,) and "grad mode was off" in found.message
    assert "with torch.no_grad()" in found.advice


def test_a_loss_computed_in_an_ended_no_grad_block_is_not_this():
    assert "GS461" not in {f.rule for f in _crashed("no_grad block")}


def _forces_evaluated(enable_grad: bool):
    """A force field's loop whose evaluation takes forces -dE/dx inside torch.no_grad():
    under `torch.enable_grad()` (the working pattern), or without it (autograd.grad fails)."""
    torch.manual_seed(0)
    energy = nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 1))
    opt = torch.optim.Adam(energy.parameters(), lr=1e-3)

    def forces(pos, create_graph):
        pos = pos.clone().requires_grad_(True)
        return -torch.autograd.grad(energy(pos).sum(), pos, create_graph=create_graph)[0]

    fails = pytest.raises(RuntimeError, match="does not require grad")
    with fails if not enable_grad else contextlib.nullcontext(), gradscope.watch() as w:
        for _ in range(4):
            pos = torch.randn(8, 3)
            loss = F.mse_loss(forces(pos, True), -pos)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad(), torch.set_grad_enabled(enable_grad):
            forces(torch.randn(8, 3), False)
    return w.report.findings


def test_an_evaluations_forces_taken_inside_no_grad_are_named():
    (found,) = [f for f in _forces_evaluated(enable_grad=False) if f.rule == "GS461"]
    assert found.subject == "autograd.grad" and "after 4 optimizer steps" in found.message
    assert "torch.enable_grad()" in found.advice


def test_an_evaluations_forces_under_enable_grad_are_silent():
    assert "GS461" not in {f.rule for f in _forces_evaluated(enable_grad=True)}
