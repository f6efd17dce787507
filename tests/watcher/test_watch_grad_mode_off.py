"""A backward that fails because an evaluation left grad mode off (GS461): the script called
torch.set_grad_enabled(False) for its evaluation and only model.train() after it. The same
crash from a loss computed inside a `with torch.no_grad():` block (grad mode back on at the
backward) is not named so."""

from __future__ import annotations

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
