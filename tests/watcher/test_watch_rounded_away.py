"""A bfloat16 weight whose updates round away (GS410's cause): a LayerNorm weight of 1.0 in
bfloat16 has neighbours 0.0039 below and 0.0078 above, and AdamW's step of about lr = 3e-3
per element rounds back to 1.0 at every step. GS410 said "its learning rate is far too
small for its gradients" and "give it a learning rate"; the cause is the weight's dtype,
and the fix float32 master weights. The float32 run is silent, a larger lr moves the
bfloat16 weight, and an lr of 0 is still named as such."""

from __future__ import annotations

import pytest
import torch

import gradscope

STEPS = 40


def _gs410(dtype: torch.dtype, lr: float, norm_lr: float | None = None) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 1)
    )
    model = model.to(dtype)
    norm = list(model[1].parameters())
    rest = [p for p in model.parameters() if all(p is not q for q in norm)]
    groups = [{"params": rest}, {"params": norm, **({} if norm_lr is None else {"lr": norm_lr})}]
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=0.0)
    x, y = torch.randn(STEPS, 16, 8), torch.randn(STEPS, 16, 1)
    with gradscope.watch() as w:
        for i in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[i].to(dtype)).float(), y[i]).backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS410" and f.subject == "1.weight"]


def test_a_bfloat16_weight_whose_updates_round_away_is_named_by_its_dtype():
    (found,) = _gs410(torch.bfloat16, 3e-3)
    assert found.rule == "GS410"
    assert "bfloat16" in found.message and "rounds back to the weight" in found.message
    assert "float32" in found.advice and "torch.autocast" in found.advice


@pytest.mark.parametrize(("dtype", "lr"), [(torch.float32, 3e-3), (torch.bfloat16, 3e-2)])
def test_a_float32_weight_or_a_step_above_the_spacing_is_silent(dtype, lr):
    assert _gs410(dtype, lr) == []


def test_a_bfloat16_weight_at_lr_zero_is_still_named_by_its_lr():
    (found,) = _gs410(torch.bfloat16, 3e-3, norm_lr=0.0)
    assert "learning rate is 0" in found.message and "bfloat16" not in found.message
