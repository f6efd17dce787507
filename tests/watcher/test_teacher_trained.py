"""GS446: an EMA teacher left in the optimizer with its forward attached (no stop-gradient
on the self-distillation target), told by the script's in-place writes between steps
(version counters) on a copy of a trained model that also gets gradients. Its look-alikes
stay silent: the same teachers under no_grad, a teacher in the optimizer that gets no
gradient, a WGAN critic clipped in place (no copy of anything)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from gradscope.watcher.hand_moved import HandMoved
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "self_distill.py"


def test_in_place_writes_between_steps_are_counted_only_with_a_gradient():
    student, teacher = nn.Linear(3, 3), nn.Linear(3, 3)
    params = [*student.parameters(), *teacher.parameters()]
    opt = SimpleNamespace(param_groups=[{"params": params}])  # what HandMoved reads of one
    index = {id(p): i for i, p in enumerate(params)}
    moved = HandMoved()
    for step in (1, 2, 3):
        moved.before_step(opt, index)
        (student(torch.ones(3)).sum() + teacher(torch.ones(3)).sum()).backward()
        with torch.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)  # the optimizer's own step: written before it is kept
        moved.after_step(opt, step)
        with torch.no_grad():
            teacher.weight.lerp_(student.weight, 0.1)  # the EMA, by hand
            if step == 1:
                student.bias.add_(1.0)  # once only: not at every interval
    moved.before_step(opt, index)
    assert moved.facts() == ((2,), 2)  # teacher.weight, in both intervals read (1-2, 2-3)
    teacher.weight.grad = None
    idle = HandMoved()
    idle.after_step(opt, 1)
    with torch.no_grad():
        teacher.weight.lerp_(student.weight, 0.1)
    idle.before_step(opt, index)
    assert idle.facts() == ((), 1)  # written, but holding no gradient: no optimizer trains it


def test_writes_through_data_are_counted_by_their_values():
    """`.data.mul_()` moves no version counter: the EMA of DINO's, MoCo's and BYOL's
    reference code is told by its parameters' norms, which change; the optimizer's own
    step and a backward are not counted, and nor is a write that leaves the values as
    they were (an EMA toward an equal student)."""
    student, teacher = nn.Linear(3, 3), nn.Linear(3, 3)
    params = [*student.parameters(), *teacher.parameters()]
    opt = SimpleNamespace(param_groups=[{"params": params}])
    index = {id(p): i for i, p in enumerate(params)}
    moved = HandMoved()
    for step in (1, 2, 3):
        moved.before_step(opt, index)
        (student(torch.ones(3)).sum() + teacher(torch.ones(3)).sum()).backward()
        with torch.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
        moved.after_step(opt, step)
        teacher.weight.data.mul_(0.996).add_(0.004 * student.weight.data)
        teacher.bias.data.mul_(1.0)
    moved.before_step(opt, index)
    assert moved.facts() == ((2,), 2)
    assert moved.written() == (2,)


def test_each_optimizer_counts_its_own_intervals():
    """A GAN's discriminator steps between the generator's: its intervals are its own, so
    the generator's EMA copy, written at every one of the generator's, is still counted."""
    gen, ema, disc = nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 3)
    g_params, d_params = [*gen.parameters(), *ema.parameters()], [*disc.parameters()]
    g_opt = SimpleNamespace(param_groups=[{"params": g_params}])
    d_opt = SimpleNamespace(param_groups=[{"params": d_params}])
    index = {id(p): i for i, p in enumerate(g_params + d_params)}
    moved = HandMoved()
    for step in (1, 2, 3):
        for opt, params in ((d_opt, d_params), (g_opt, g_params)):
            moved.before_step(opt, index)
            sum(p.sum() for p in params).backward()
            moved.after_step(opt, step)
        with torch.no_grad():
            ema.weight.lerp_(gen.weight, 0.1)
    moved.before_step(g_opt, index)
    moved.before_step(d_opt, index)
    assert moved.facts() == ((2,), 2)  # ema.weight, at both of the generator's intervals


def gs446(mode, name=SCRIPT):
    return [f for f in domain_watched(name, mode).findings if f.rule == "GS446"]


def test_an_attached_byol_teacher_in_the_optimizer_is_named():
    (found,) = [f for f in domain_watched(SCRIPT, "byol-attached").findings if f.rule == "GS446"]
    assert "an EMA teacher" in found.message and "no stop-gradient" in found.message
    assert "torch.no_grad()" in found.advice and "out of the optimizer" in found.advice
    assert gs446("byol") == []


def test_an_attached_teacher_moved_through_data_is_named():
    """The reference code's EMA, `param_k.data.mul_(m).add_(...)`: no version counter."""
    (found,) = gs446("dino-attached-data")
    assert "an EMA teacher" in found.message and "no stop-gradient" in found.message
    assert gs446("dino-data") == []
    assert gs446("wgan-data") == []  # clipped through .data: written, a copy of nothing


@pytest.mark.slow
def test_an_attached_dino_teacher_is_the_cause_of_what_follows():
    report = domain_watched(SCRIPT, "dino-attached")
    (found,) = [f for f in report.findings if f.rule == "GS446"]
    assert report.findings[0] is found
    assert all(f.explained_by for f in report.findings if f is not found)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "mode"),
    [
        (SCRIPT, "dino"),
        (SCRIPT, "wgan"),  # a critic clipped in place: written by hand, a copy of nothing
        (SCRIPT, "byol-outside"),  # outside every optimizer: GS411's, named there
        ("mean_teacher.py", "in_opt"),  # in the optimizer, under no_grad: no gradient
        ("mean_teacher.py", "detached"),
    ],
)
def test_teachers_under_no_grad_and_clipped_weights_are_silent(name, mode):
    assert gs446(mode, name) == []
