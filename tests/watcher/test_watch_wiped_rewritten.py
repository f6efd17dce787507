"""GS435 where the step's `.grad` is assigned a new tensor after its backward calls, each
of which freed its graph: simulated workers (signSGD's majority vote) each run a backward
whose gradient is read and reset, and the vote is written into `.grad`. The order of the
calls cannot tell that from a reset inside an accumulation loop whose last gradient is
rewritten (unless the tensor written is a multiple of the last call's gradient),
so it is information naming both (it was the error: "the update applied only
the last micro-batch"). A reset inside an accumulation loop whose gradient is rescaled
into a new tensor (a multiple of the last call's), compressed in place, or left as it is,
is still the error."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


def _run(how: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    xs, ys = torch.randn(8, 3, 4, 6), torch.randint(0, 3, (8, 3, 4))
    with gradscope.watch() as w:
        for step_x, step_y in zip(xs, ys, strict=True):
            votes = [torch.zeros_like(p) for p in model.parameters()]
            for x, y in zip(step_x, step_y, strict=True):
                model.zero_grad()
                F.cross_entropy(model(x), y).backward()
                for v, p in zip(votes, model.parameters(), strict=True):
                    v.add_(p.grad.sign())
            for v, p in zip(votes, model.parameters(), strict=True):
                if how == "majority vote":
                    p.grad = v.sign()
                elif how == "rescaled by hand":
                    p.grad = p.grad / 3
                elif how == "compressed in place":
                    p.grad.copy_(p.grad.sign() * p.grad.abs().mean())
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS435"]


def test_simulated_workers_combined_by_hand_are_information_with_both_readings():
    (f,) = _run("majority vote")
    assert f.severity == Severity.INFO
    assert "a new tensor" in f.message and "lost the first 2" in f.message
    assert "majority vote" in f.advice and "before the accumulation loop" in f.advice


def test_a_reset_inside_accumulation_is_still_the_error():
    for how in ("rescaled by hand", "compressed in place", "left as it is"):
        (f,) = _run(how)
        assert f.severity == Severity.ERROR, how
        assert "applied only the last 1" in f.message
