"""A clip that no step applies (GS457): clip_grad_norm_ called before the backward (on the
previous step's gradients, which zero_grad then clears) or after the step left every
update unclipped, and the watch reported the run clean. The look-alikes stay silent: the
clip between backward and step, that clip plus a norm logged after the step, a clip
before the backward whose max_norm the gradients never reach, and one backward stepped by
two optimizers, the second clipped after the first's step."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.findings import Severity

MAX_NORM = 0.05
"""Below the toy regression's gradient norms (about 1): a clip in place binds."""


def _run(order: str):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    with gradscope.watch() as w:
        clip = torch.nn.utils.clip_grad_norm_  # the watch's, as the script would call it
        for i in range(0, 64, 4):
            if order == "before-backward":
                clip(model.parameters(), MAX_NORM)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[i : i + 4]), y[i : i + 4]).backward()
            if order in ("between", "logged-after"):
                clip(model.parameters(), MAX_NORM)
            opt.step()
            if order in ("after-step", "logged-after"):
                clip(model.parameters(), MAX_NORM)
            if order == "never-binds":
                clip(model.parameters(), 1e6)
    return w.report


@pytest.mark.parametrize("order", ["before-backward", "after-step"])
def test_a_clip_no_step_applies_is_named_at_its_line(order):
    (f,) = [f for f in _run(order).findings if f.rule == "GS457"]
    assert f.severity == Severity.WARNING and "test_watch_clip_order.py:" in f.message
    assert "after loss.backward() and before optimizer.step()" in f.advice


@pytest.mark.parametrize("order", ["between", "logged-after", "never-binds"])
def test_a_clip_in_place_or_one_that_never_binds_is_silent(order):
    assert "GS457" not in {f.rule for f in _run(order).findings}


def test_a_second_optimizer_clipped_after_the_firsts_step_is_silent():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(8, 4), torch.nn.Linear(4, 1)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.05)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.05)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    with gradscope.watch() as w:
        for i in range(0, 64, 4):
            opt_a.zero_grad()
            opt_b.zero_grad()
            torch.nn.functional.mse_loss(b(a(x[i : i + 4])), y[i : i + 4]).backward()
            torch.nn.utils.clip_grad_norm_(a.parameters(), MAX_NORM)
            opt_a.step()
            torch.nn.utils.clip_grad_norm_(b.parameters(), MAX_NORM)
            opt_b.step()
    assert "GS457" not in {f.rule for f in w.report.findings}, w.report.findings
