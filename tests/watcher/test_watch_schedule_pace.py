"""A schedule sized in optimizer steps and stepped once per epoch (GS463): OneCycleLR with
total_steps = epochs × batches, or a cosine whose T_max is the run's steps, stepped after
the loop over batches, ends the run a few percent into its schedule (OneCycleLR at its
warm-up's start, max_lr / 25, throughout) and no rule said so. The look-alikes stay
silent: the same schedules stepped per batch, and schedules sized in epochs and stepped
per epoch."""

from __future__ import annotations

import pytest
import torch

import gradscope

EPOCHS, BATCHES = 6, 8
STEPS = EPOCHS * BATCHES


def _watched(make, per_epoch: bool):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = make(opt)
    x = torch.randn(STEPS, 8, 4)
    with gradscope.watch() as w:
        for epoch in range(EPOCHS):
            for b in range(BATCHES):
                opt.zero_grad()
                model(x[epoch * BATCHES + b]).pow(2).mean().backward()
                opt.step()
                if not per_epoch:
                    sched.step()
            if per_epoch:
                sched.step()
    return w.report


def _one_cycle(total):
    return lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.2, total_steps=total)


def _cosine(t_max):
    return lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=t_max)


@pytest.mark.parametrize(("make", "kind"), [(_one_cycle, "OneCycleLR"), (_cosine, "Cosine")])
def test_a_schedule_sized_in_steps_stepped_per_epoch_is_named(make, kind):
    report = _watched(make(STEPS), per_epoch=True)
    (found,) = [f for f in report.findings if f.rule == "GS463"]
    assert kind in found.subject and f"the {STEPS} optimizer steps the run took" in found.message
    assert f"stepped {EPOCHS} times" in found.message and "12% into its schedule" in found.message
    assert "after every optimizer.step()" in found.advice
    assert not any(f.rule == "GS436" for f in report.findings)


@pytest.mark.parametrize(
    ("make", "per_epoch"),
    [
        (_one_cycle(STEPS), False),
        (_cosine(STEPS), False),
        (_cosine(EPOCHS), True),
        (_one_cycle(EPOCHS), True),
    ],
    ids=["one-cycle-per-batch", "cosine-per-batch", "cosine-of-epochs", "one-cycle-of-epochs"],
)
def test_a_schedule_stepped_at_its_own_pace_is_silent(make, per_epoch):
    report = _watched(make, per_epoch)
    assert not any(f.rule == "GS463" for f in report.findings)
