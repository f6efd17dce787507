"""A learning rate rescaled in place every step and never restored (GS458): AWD-LSTM's
variable BPTT without its restore took the lr from 30 to 0.1 in 50 steps, and the watch
named lr-too-high ("lower the lr 230×"). The look-alikes stay silent: the same rescale
restored after each step, a hand-written warm-up and decay, and a scheduler's cycle."""

from __future__ import annotations

import random

import pytest
import torch

import gradscope


def _run(how: str, steps: int = 60):
    torch.manual_seed(0)
    draw = random.Random(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = None
    if how == "cyclic":
        sched = torch.optim.lr_scheduler.CyclicLR(opt, 1e-4, 0.01, step_size_up=3)
    x, y = torch.randn(steps * 4, 8), torch.randn(steps * 4, 1)
    with gradscope.watch() as w:
        for i in range(steps):
            group = opt.param_groups[0]
            base = group["lr"]
            factor = max(5, round(draw.gauss(20, 5))) / 20  # seq_len / bptt
            if how in ("restored", "compounded"):
                group["lr"] = base * factor
            elif how == "warmup-decay":
                group["lr"] = 0.01 * min((i + 1) / 10, 0.97 ** (i - 9))
            opt.zero_grad()
            batch = slice(i * 4, i * 4 + 4)
            torch.nn.functional.mse_loss(model(x[batch]), y[batch]).backward()
            opt.step()
            if how == "restored":
                group["lr"] = base
            if sched is not None:
                sched.step()
    return w.report


def test_a_per_batch_lr_rescale_never_restored_is_named():
    report = _run("compounded")
    (f,) = [f for f in report.findings if f.rule == "GS458"]
    assert "factors compound" in f.message and "restore it after optimizer.step()" in f.advice


@pytest.mark.parametrize("how", ["restored", "warmup-decay", "cyclic"])
def test_a_rescale_restored_a_hand_schedule_or_a_cycle_is_silent(how):
    assert "GS458" not in {f.rule for f in _run(how).findings}
