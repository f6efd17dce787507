"""GS411 on a float16/bfloat16 model trained through float32 master weights kept by hand
(apex O2, Megatron's flat buffer): the optimizer holds the masters, the model's parameters
are in no param group by design, their gradients are copied into the masters and the
masters copied back after each step. That was information advising requires_grad_(False),
which would stop every gradient the masters read; it is silent now. Masters never copied
back (the model never moves) are named as such; a layer replaced after the optimizer was
built (its old tensor left in the optimizer, in the model's own dtype) is still the plain
error."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


def _model(dtype: torch.dtype) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3)).to(
        dtype
    )


def _masters_run(dtype: torch.dtype, *, flat: bool, copy_back: bool):
    model = _model(dtype)
    params = list(model.parameters())
    if flat:
        masters = [torch.nn.Parameter(torch.cat([p.detach().float().reshape(-1) for p in params]))]
    else:
        masters = [p.detach().float().clone().requires_grad_() for p in params]
    opt = torch.optim.AdamW(masters, lr=1e-2)
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
    with gradscope.watch() as w:
        for step in range(8):
            xb, yb = x[step * 8 : step * 8 + 8], y[step * 8 : step * 8 + 8]
            loss = F.cross_entropy(model(xb.to(dtype)).float(), yb)
            (loss * 128.0).backward()
            grads = [p.grad.float().reshape(-1) / 128.0 for p in params]
            if flat:
                masters[0].grad = torch.cat(grads)
            else:
                for m, g in zip(masters, grads, strict=True):
                    m.grad = g.view_as(m)
            for p in params:
                p.grad = None
            opt.step()
            opt.zero_grad(set_to_none=True)
            if copy_back:
                with torch.no_grad():
                    flat_values = torch.cat([m.reshape(-1) for m in masters])
                    offset = 0
                    for p in params:
                        p.copy_(flat_values[offset : offset + p.numel()].view_as(p))
                        offset += p.numel()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_masters_per_tensor_copied_back_are_not_judged():
    assert _masters_run(torch.bfloat16, flat=False, copy_back=True) == []


def test_a_flat_master_buffer_copied_back_is_not_judged():
    assert _masters_run(torch.float16, flat=True, copy_back=True) == []


def test_masters_never_copied_back_are_named():
    found = _masters_run(torch.bfloat16, flat=False, copy_back=False)
    assert len(found) == 4
    assert all(f.severity == Severity.ERROR for f in found)
    assert all("never copied back" in f.message for f in found)
    assert "p.copy_(master)" in found[0].advice


def test_a_layer_replaced_after_the_optimizer_was_built_is_still_the_error():
    model = _model(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = torch.nn.Linear(16, 3).to(torch.bfloat16)
    x, y = torch.randn(64, 8, dtype=torch.bfloat16), torch.randint(0, 3, (64,))
    with gradscope.watch() as w:
        for step in range(8):
            loss = F.cross_entropy(
                model(x[step * 8 : step * 8 + 8]).float(), y[step * 8 : step * 8 + 8]
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
    found = [f for f in w.report.findings if f.rule == "GS411"]
    assert {f.subject for f in found} == {"2.weight", "2.bias"}
    assert all(f.severity == Severity.ERROR and "master" not in f.message for f in found)
