"""Adam's betas swapped, (0.999, 0.9), break Adam's own convergence condition β1² < √β2:
the momentum averages ~1000 steps, the second moment ~10. No rule said so (the run trains,
slowly). GS462 reads it from the optimizer's settings; the common settings stay silent
((0.9, 0.999), a GAN's (0.5, 0.999) and (0, 0.9), a language model's (0.9, 0.95)), and so
does a class gradscope does not know, whose betas may mean something else."""

from __future__ import annotations

import pytest
import torch

import gradscope


class Interpolated(torch.optim.Optimizer):
    """An optimizer of its own, its betas not Adam's: β1 interpolates, β2 keeps momentum."""

    def __init__(self, params, lr=1e-3, betas=(0.99, 0.9)):
        super().__init__(params, {"lr": lr, "betas": betas})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                m = self.state[p].setdefault("m", torch.zeros_like(p))
                p.add_((m * beta1 + p.grad * (1 - beta1)).sign(), alpha=-group["lr"])
                m.mul_(beta2).add_(p.grad, alpha=1 - beta2)


def _findings(make) -> list:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = make(model.parameters())
    x = torch.randn(6, 8, 4)
    with gradscope.watch() as w:
        for i in range(6):
            opt.zero_grad()
            model(x[i]).pow(2).mean().backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS462"]


@pytest.mark.parametrize("kind", [torch.optim.Adam, torch.optim.AdamW, torch.optim.NAdam])
def test_swapped_betas_are_named_with_the_order_that_fixes_them(kind):
    (found,) = _findings(lambda p: kind(p, lr=1e-3, betas=(0.999, 0.9)))
    assert found.rule == "GS462" and found.severity.name == "WARNING"
    assert "~1000 steps" in found.message and "~10" in found.message
    assert found.advice.startswith("betas=(0.9, 0.999)")


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.Adam(p, betas=(0.9, 0.999)),
        lambda p: torch.optim.Adam(p, betas=(0.5, 0.999)),
        lambda p: torch.optim.Adam(p, betas=(0.0, 0.9)),
        lambda p: torch.optim.AdamW(p, betas=(0.9, 0.95)),
        lambda p: torch.optim.AdamW(p, betas=(0.9, 0.9)),
        lambda p: Interpolated(p),
    ],
    ids=["default", "dcgan", "wgan-gp", "llm", "equal", "own-class"],
)
def test_common_betas_and_an_unknown_class_are_silent(make):
    assert _findings(make) == []
