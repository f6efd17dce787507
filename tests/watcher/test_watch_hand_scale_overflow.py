"""GS434's advice where a loss scale kept by hand let an overflow through: the loss is
multiplied by a power of two, its gradients overflow while the loss stays finite, and the
script's own check (on the loss, or isinf alone) did not skip the step. The advice named
only the replay and error_if_nonfinite; it names the skipped step's check now. A NaN
gradient of a finite loss with no such scale (a sqrt at 0) keeps the advice it had."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope


def _gs434(how: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    model = model.half()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 8).half() * 8, torch.randn(16, 1) * 4
    with gradscope.watch() as w:
        for _ in range(4):
            loss = F.mse_loss(model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            if how == "scaled":
                scale = 2.0**16  # float16 gradients overflow, the float32 loss times it does not
                (loss * scale).backward()
                if torch.isfinite(loss * scale):  # the overflow checked on the loss
                    for p in model.parameters():
                        p.grad.div_(scale)
                    opt.step()
            else:
                (loss + torch.sqrt((model[0].weight * 0).sum().abs())).backward()
                opt.step()
    (f,) = [f for f in w.report.findings if f.rule == "GS434"]
    return f


def test_an_overflow_a_hand_scale_let_through_is_told_to_skip_the_step():
    f = _gs434("scaled")
    assert "loss scale kept by hand" in f.advice
    assert "torch.isfinite on every gradient" in f.advice


def test_a_nan_gradient_with_no_scale_keeps_its_advice():
    f = _gs434("sqrt")
    assert "loss scale" not in f.advice
    assert "error_if_nonfinite=True" in f.advice
