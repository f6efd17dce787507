"""GS436's advice follows who steps the scheduler: the script's own `scheduler.step()` is
told to step it per epoch; one Lightning's loop steps (`"interval": "step"` in
configure_optimizers) is told to return it with `"interval": "epoch"`. The loop's frame is
compiled under Lightning's path, as its training-epoch loop calls `scheduler.step()`."""

from __future__ import annotations

import torch

import gradscope

LOOP = "/site-packages/lightning/pytorch/loops/training_epoch_loop.py"
STEP = "def update_learning_rates(scheduler):\n    scheduler.step()\n"


def watched(stepper):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.1)
    with gradscope.watch() as w:
        for _ in range(24):
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            stepper(sched)
    (found,) = [f for f in w.report.findings if f.rule == "GS436"]
    return found


def test_a_schedule_lightnings_loop_steps_is_told_its_interval():
    space: dict = {}
    exec(compile(STEP, LOOP, "exec"), space)
    found = watched(space["update_learning_rates"])
    assert '"interval": "epoch"' in found.advice and "configure_optimizers" in found.advice


def test_a_schedule_the_script_steps_is_told_to_step_it_per_epoch():
    found = watched(lambda s: s.step())
    assert "once per epoch, after the loop over batches" in found.advice
    assert "interval" not in found.advice
