"""GS446 where the student is written by hand too: CoTTA restores a random few of the
student's weights to the source's after each step, so the student's first layer is written
between steps as well as the EMA teacher. The teacher, every parameter written at every
interval, is still the copy: left in the optimizer with its forward attached it is named.
Its look-alikes stay silent: the teacher as CoTTA builds it (detached, out of the
optimizer), and two members of one ensemble whose weights, not biases, are clamped
(neither is the other's EMA)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from gradscope import api


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def _cotta(teacher_trained: bool) -> list[str]:
    torch.manual_seed(0)
    student = _net()
    source = copy.deepcopy(student.state_dict())
    teacher = copy.deepcopy(student)
    params = [*student.parameters()]
    if teacher_trained:
        params += [*teacher.parameters()]  # the EMA stepped by the optimizer too
    else:
        teacher.requires_grad_(False)
    opt = torch.optim.Adam(params, lr=1e-3)
    with api.watch() as w:
        for _ in range(4):
            x = torch.randn(16, 8)
            target = teacher(x).softmax(1)  # attached only when the teacher requires grad
            loss = -(target * student(x).log_softmax(1)).sum(1).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            with torch.no_grad():
                for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
                    t.data[:] = 0.999 * t.data + 0.001 * s.data
                first = student[0].weight
                mask = (torch.rand(first.shape) < 0.3).float()  # the stochastic restore
                first.data = source["0.weight"] * mask + first * (1.0 - mask)
    return [f.rule for f in w.report.findings]


@pytest.mark.parametrize(("teacher_trained", "named"), [(True, True), (False, False)])
def test_an_ema_teacher_beside_a_student_restored_in_part(teacher_trained, named):
    assert ("GS446" in _cotta(teacher_trained)) is named


def test_two_members_with_their_weights_clamped_are_no_copies():
    torch.manual_seed(0)
    a = _net()
    b = copy.deepcopy(a)  # an ensemble's members started equal
    opt = torch.optim.SGD([*a.parameters(), *b.parameters()], lr=0.1)
    with api.watch() as w:
        for _ in range(4):
            x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
            loss = nn.functional.cross_entropy(a(x), y) + nn.functional.cross_entropy(b(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                for member in (a, b):  # a max-norm on the weights, not on the biases
                    for layer in (member[0], member[2]):
                        layer.weight.clamp_(-0.2, 0.2)
    assert "GS446" not in [f.rule for f in w.report.findings]
