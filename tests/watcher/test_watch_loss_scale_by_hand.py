"""GS438 on a loss scale kept by hand (float16 training without GradScaler): the loss is
multiplied by S before its backward and the gradients must be divided by S before SGD's
step. Left undivided, the step is lr × S: that was GS419 advising to lower the learning
rate about S times, which hides the missing unscale; it is named now. Gradients divided
by S are silent; an lr too high by far more than a small factor on the loss, or too high
with the gradients divided, stays GS419's."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope


def _rules(*, scale: float, unscale: bool, lr: float) -> dict[str, list]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    x, y = torch.randn(256, 16), torch.randint(0, 4, (256,))
    with gradscope.watch() as w:
        for step in range(16):
            xb, yb = x[step * 8 % 256 :][:8], y[step * 8 % 256 :][:8]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            (loss * scale).backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            if not all(torch.isfinite(g).all() for g in grads):
                continue
            if unscale:
                torch._foreach_div_(grads, scale)
            opt.step()
    out: dict[str, list] = {}
    for f in w.report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_gradients_left_scaled_are_named():
    found = _rules(scale=1024.0, unscale=False, lr=0.01)
    (f,) = found["GS438"]
    assert "multiplied by 1024" in f.message and "undivided" in f.message
    assert "divide every gradient by 1024" in f.advice
    assert "GS419" not in found


def test_gradients_divided_by_the_scale_are_silent():
    found = _rules(scale=1024.0, unscale=True, lr=0.01)
    assert "GS438" not in found and "GS419" not in found


def test_divided_gradients_under_an_lr_too_high_stay_lr_too_high():
    found = _rules(scale=1024.0, unscale=True, lr=0.05)
    assert "GS438" not in found
    assert "GS419" in found


def test_an_lr_too_high_beyond_a_small_factor_stays_lr_too_high():
    found = _rules(scale=2.0, unscale=False, lr=20.0)
    assert "GS438" not in found
    assert "GS419" in found
