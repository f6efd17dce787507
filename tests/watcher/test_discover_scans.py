"""The scans of the live objects a watch makes (each a walk of every object the process
holds): the first backward's finds the model, and an optimizer whose parameters all lie
in a model found so steps without a scan of its own; one that steps anything else still
scans, and names it."""

from __future__ import annotations

import copy
import gc

import pytest
import torch
from torch import nn

import gradscope as gs
from gradscope.watcher import discover


@pytest.fixture
def scans(monkeypatch) -> list[int]:
    """The number of scans so far, one entry per scan."""
    out: list[int] = []
    real = discover.root_modules

    def counted(owned, *rest):
        out.append(len(owned))
        return real(owned, *rest)

    monkeypatch.setattr(discover, "root_modules", counted)
    return out


def _train(opt: torch.optim.Optimizer, forward, steps: int = 3, clip: bool = False):
    with gs.watch() as w:
        for _ in range(steps):
            opt.zero_grad()
            forward().pow(2).mean().backward()
            if clip:
                params = [p for g in opt.param_groups for p in g["params"]]
                torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
    return w.report.run


def test_an_optimizer_over_the_model_the_first_backward_found_steps_without_a_scan(scans):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    run = _train(opt, lambda: model(torch.randn(16, 4)))
    assert len(scans) == 1  # the first backward's
    assert run.names() == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(run.steps) == 3 and run.optimizers == ("Adam",)


def test_the_first_step_reads_the_frozen_networks_off_the_first_backwards_walk(walks):
    """One walk of every object a run: the first backward's finds the model and keeps the
    live modules and optimizers for the first step, which finds the frozen teacher in it."""
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
    teacher.requires_grad_(False)
    student = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.Adam(student.parameters(), lr=0.01)
    with gs.watch() as w:
        for _ in range(3):
            x = torch.randn(16, 4)
            opt.zero_grad()
            (student(x) - teacher(x)).pow(2).mean().backward()
            opt.step()
    assert len(walks) == 1 and len(w.report.run.steps) == 3
    frozen = w.state.frozen_norms
    assert frozen.started_at == 1 and [f.network for f in frozen.frozen] == [teacher]


def test_a_clip_before_the_first_step_over_the_model_found_needs_no_scan(scans):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    run = _train(opt, lambda: model(torch.randn(16, 4)), clip=True)
    assert len(scans) == 1
    assert run.names() == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(s.clipped_norm is not None for s in run.steps)


def test_a_clip_over_a_model_the_first_backward_missed_scans_and_names_it(scans):
    torch.manual_seed(0)
    critic, generator = nn.Sequential(nn.Linear(4, 1)), nn.Sequential(nn.Linear(2, 4))
    opt = torch.optim.SGD([*critic.parameters(), *generator.parameters()], lr=0.1)
    run = _train(opt, lambda: critic(generator(torch.randn(8, 2)).detach()), clip=True)
    assert len(scans) == 2  # the first backward's and the clip's; the step's: none
    assert set(run.names()) >= {"Sequential.0.weight", "Sequential2.0.weight"}


def test_an_optimizer_over_a_model_the_first_backward_missed_scans_and_names_it(scans):
    """A GAN-like pair: the backward reaches the critic only (the generator's output is
    detached); the optimizer holds the generator too, which its first step's scan finds
    and names."""
    torch.manual_seed(0)
    critic, generator = nn.Sequential(nn.Linear(4, 1)), nn.Sequential(nn.Linear(2, 4))
    opt = torch.optim.SGD([*critic.parameters(), *generator.parameters()], lr=0.1)
    run = _train(opt, lambda: critic(generator(torch.randn(8, 2)).detach()))
    assert len(scans) == 2
    assert set(run.names()) >= {"Sequential.0.weight", "Sequential2.0.weight"}


def test_a_parameter_outside_the_model_in_the_optimizer_scans_and_is_named(scans):
    """The model's layer replaced after the optimizer was built: the optimizer's old
    tensor lies in no model, so its first step scans and names it by its place."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model[0].weight = nn.Parameter(torch.randn(1, 4))
    run = _train(opt, lambda: model(torch.randn(8, 4)))
    assert len(scans) == 2
    assert "optimizer0.group0.param0" in run.names()


@pytest.fixture
def walks(monkeypatch) -> list[type]:
    """The walks of every live object so far, by the kind looked for (the collector held
    off while the test runs: a model made since the last walk stays young)."""
    out: list[type] = []
    real = discover.live

    def counted(kind, *args):
        out.append(kind)
        return real(kind, *args)

    monkeypatch.setattr(discover, "live", counted)
    gc.disable()
    yield out
    gc.enable()


def _reptile(model: nn.Module, tasks: int):
    """Reptile: a clone of the model per task, trained by an SGD of its own for 2 steps."""
    outer = torch.optim.SGD(model.parameters(), lr=0.1)
    with gs.watch() as w:
        for _ in range(tasks):
            fast = copy.deepcopy(model)
            inner = torch.optim.SGD(fast.parameters(), lr=0.05)
            for _ in range(2):
                inner.zero_grad()
                fast(torch.randn(8, 4)).pow(2).mean().backward()
                inner.step()
            outer.zero_grad()
            for p, q in zip(model.parameters(), fast.parameters(), strict=False):
                p.grad = p.detach() - q.detach()
            outer.step()
    return w.report


def test_a_clone_made_since_the_last_walk_is_found_among_the_young_objects(walks):
    """A task's clone with its own optimizer: found without a walk of every object, and
    named as a walk names it (a model per clone)."""
    torch.manual_seed(0)
    run = _reptile(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), 3).run
    assert len(walks) == 1  # the first backward's, which the first step's frozen nets read
    assert [n for n in run.names() if n.endswith("0.weight")] == [
        f"Sequential{k}.0.weight" for k in ("", "2", "3", "4")
    ]
