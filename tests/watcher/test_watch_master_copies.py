"""GS411 on model weights an optimizer steps through a copy of their values: fp32 master
weights beside a bfloat16 model (apex's FP16_Optimizer, Megatron) and a ZeRO-1-like
optimizer holding the flattened weights in shards. The model's tensors are in no param
group, their gradients are handed to the copy and its values written back: nothing to
judge (it said their gradients were read by nothing and advised requires_grad_(False),
which would stop training). A copy never written back is the error,
named; a layer left out with no copy is still the plain error."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

import gradscope
from gradscope.findings import Severity


def _model(dtype: torch.dtype) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(
        dtype
    )


def _master(params: list[torch.nn.Parameter], sharded: bool) -> list[torch.nn.Parameter]:
    """fp32 copies of the values: one per tensor, or the flat vector cut in two shards."""
    if not sharded:
        return [torch.nn.Parameter(p.detach().float().clone()) for p in params]
    flat = _flatten_dense_tensors([p.detach().float() for p in params])
    return [torch.nn.Parameter(s.clone()) for s in flat.chunk(2)]


def _run(how: str, sharded: bool = False):
    model = _model(torch.float32 if sharded else torch.bfloat16)
    params = list(model.parameters())
    master = _master(params, sharded)
    opt = torch.optim.Adam(master if how != "left-out" else params[:2], lr=1e-2)
    xs, ys = torch.randn(6, 16, 6), torch.randint(0, 3, (6, 16))
    with gradscope.watch() as w:
        for x, y in zip(xs, ys, strict=True):
            model.zero_grad(set_to_none=True)
            F.cross_entropy(model(x.to(params[0].dtype)).float(), y).backward()
            if how == "left-out":
                opt.step()
                continue
            grads = _flatten_dense_tensors([p.grad.float() for p in params])
            for m, g in zip(master, grads.split([m.numel() for m in master]), strict=True):
                m.grad = g.view_as(m).clone()
            opt.step()
            if how == "written-back":
                flat = torch.cat([m.detach().flatten() for m in master])
                with torch.no_grad():
                    for p, v in zip(params, _unflatten_dense_tensors(flat, params), strict=True):
                        p.copy_(v)
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_master_weights_written_back_are_not_judged():
    for sharded in (False, True):
        assert _run("written-back", sharded) == []


def test_master_weights_never_written_back_are_the_error_named():
    found = _run("never-written-back", sharded=True)
    assert len(found) == 4 and {f.severity for f in found} == {Severity.ERROR}, found
    assert all("never written back" in f.message for f in found), found
    assert all("copy the stepped values back" in f.advice for f in found), found


def test_a_layer_left_out_with_no_copy_is_still_the_plain_error():
    found = _run("left-out")
    assert {f.subject for f in found} == {"2.weight", "2.bias"}, found
    assert {f.severity for f in found} == {Severity.ERROR}
    assert not any("copy of its values" in f.message for f in found)
