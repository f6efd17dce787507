"""A lambda schedule that restarts by design (ReLoRA's jagged cosine, SGDR written as a
LambdaLR) takes the lr to 0 at each restart and warms it up again within a few steps. GS436
read the first restart as a collapse ("counts epochs: step it once per epoch"). A dip the
lr climbs back out of is a restart; a lambda counted in epochs and stepped per batch stays
down, and still fires."""

from __future__ import annotations

import math

import pytest
import torch

import gradscope

STEPS = 60
CYCLE = 20
REWARM = 4


def _collapses(factor) -> list:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    x = torch.randn(STEPS, 8, 4)
    with gradscope.watch() as w:
        for i in range(STEPS):
            opt.zero_grad()
            model(x[i]).pow(2).mean().backward()
            opt.step()
            sched.step()
    return [f for f in w.report.findings if f.rule == "GS436"]


def _cosine(step: int) -> float:
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / STEPS))


def _jagged(step: int) -> float:
    """ReLoRA's cosine with a first warm-up and a short re-warm-up from 0 at each restart."""
    if step < REWARM:
        return step / REWARM
    into = step % CYCLE
    return _cosine(step) * (into / REWARM if into < REWARM else 1.0)


def _sgdr(step: int) -> float:
    """Warm restarts written as a lambda: a cosine to 0 over each cycle, then back to 1."""
    return 0.5 * (1 + math.cos(math.pi * (step % CYCLE) / CYCLE))


@pytest.mark.parametrize("factor", [_jagged, _sgdr], ids=["relora-jagged", "sgdr-lambda"])
def test_a_lambda_that_restarts_is_no_collapse(factor):
    assert _collapses(factor) == []


def test_a_lambda_counted_in_epochs_and_stepped_per_batch_still_collapses():
    (found,) = _collapses(lambda epoch: 0.1 ** (epoch // 5))
    assert "at step 11, below 1% of its peak" in found.message
    assert "once per epoch" in found.advice
