"""Step recipes stepped per optimizer step keep up to a third of the run at 1% of the peak
lr: ResNet's ×0.1 at 32k and 48k of 64k iterations, ImageNet's StepLR(30) over 90 epochs,
an exponential decay to 1% two thirds in. GS436 called each a collapsed schedule ("counts
epochs: step it once per epoch"). A schedule counted in epochs and stepped per batch falls
to 1% after a few epochs' worth of batches and the run trains on many times as long: that
still fires."""

from __future__ import annotations

import pytest
import torch

import gradscope

STEPS = 48


def _collapses(make) -> list:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = make(opt)
    x = torch.randn(STEPS, 8, 4)
    with gradscope.watch() as w:
        for i in range(STEPS):
            opt.zero_grad()
            model(x[i]).pow(2).mean().backward()
            opt.step()
            sched.step()
    return [f for f in w.report.findings if f.rule == "GS436"]


RECIPES = {
    "resnet-cifar": lambda o: torch.optim.lr_scheduler.MultiStepLR(
        o, milestones=[STEPS // 2, 3 * STEPS // 4], gamma=0.1
    ),
    "imagenet-thirds": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=STEPS // 3),
    "exponential": lambda o: torch.optim.lr_scheduler.ExponentialLR(
        o, gamma=0.01 ** (1 / (2 * STEPS // 3))
    ),
}


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_a_step_recipe_that_ends_its_run_at_one_percent_is_silent(recipe):
    assert _collapses(RECIPES[recipe]) == []


def test_an_epoch_schedule_stepped_per_batch_still_collapses():
    (found,) = _collapses(lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [5, 10], 0.1))
    assert "at step 11, below 1% of its peak" in found.message
    assert "once per epoch" in found.advice
