"""The oracle itself, on loops whose every number is known by hand: w starts at 0 and the
loss is (w - 3)², so the gradient is 2(w - 3)."""

from __future__ import annotations

import pytest
import torch

from .oracle import MANUAL, Oracle


def loss_of(w: torch.Tensor) -> torch.Tensor:
    return ((w - 3) ** 2).sum()


def test_optimizer_steps_with_clipping_record_the_norm_before_it():
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.25)
    with Oracle() as o:
        for _ in range(2):
            opt.zero_grad()
            loss_of(w).backward()
            torch.nn.utils.clip_grad_norm_([w], 1.0)
            opt.step()
    assert [s.kind for s in o.steps] == ["SGD", "SGD"]
    assert [s.loss for s in o.steps] == [9.0, pytest.approx(7.5625)]  # w: 0 → 0.25
    assert [s.grad_norm for s in o.steps] == [6.0, pytest.approx(5.5)]


def test_hand_written_updates_are_steps():
    w = torch.zeros(1, requires_grad=True)
    with Oracle() as o:
        for _ in range(3):
            w.grad = None
            loss_of(w).backward()
            w.data.add_(w.grad, alpha=-0.25)  # w: 0 → 1.5 → 2.25
    assert [s.kind for s in o.steps] == [MANUAL] * 3
    assert [s.loss for s in o.steps] == [9.0, 2.25, pytest.approx(0.5625)]
    assert [s.grad_norm for s in o.steps] == [6.0, 3.0, 1.5]


def test_closure_step_is_one_step_with_the_first_evaluation():
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=0.1, max_iter=5)

    def closure():
        opt.zero_grad()
        loss = loss_of(w)
        loss.backward()
        return loss

    with Oracle() as o:
        first = opt.step(closure)
        opt.step(closure)
    assert len(o.steps) == 2 and o.steps[0].kind == "LBFGS"
    assert o.steps[0].loss == float(first.detach()) == 9.0 and o.steps[0].grad_norm == 6.0
    assert o.steps[1].loss < 9.0


def test_accumulation_and_two_optimizers():
    a = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt_a, opt_b = torch.optim.SGD([a], lr=0.0), torch.optim.SGD([b], lr=0.0)
    with Oracle() as o:
        loss_of(a).backward()
        loss_of(a).backward()  # accumulated: grad -12
        opt_a.step()
        loss_of(a + b).backward()  # a's grad now -18; b's -6
        opt_b.step()
    assert [s.loss for s in o.steps] == [18.0, 9.0]
    assert [s.grad_norm for s in o.steps] == [12.0, 6.0]
    assert [s.updated for s in o.steps] == [1, 1]
