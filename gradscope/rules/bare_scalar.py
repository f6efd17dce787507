"""GS411's advice for a learned scalar no module holds (a GFlowNet's log Z, SAC's log
alpha, a Lagrange multiplier): a tensor of its own, made beside the model, which only a
param group of its own trains. It is no copy of a network nor a fixed one, so the advice
for those does not fit it. No torch."""

from __future__ import annotations

from math import prod

from gradscope.steps.records import ParamInfo


def advice(p: ParamInfo) -> str:
    """The param group's advice where `p` is a scalar (one element) outside every model;
    else ""."""
    if p.in_model or prod(p.shape) != 1:
        return ""
    return (
        f"{p.name} is a learned scalar no module holds (a GFlowNet's log Z, SAC's log "
        f"alpha, a temperature): add a param group for it, optimizer.add_param_group("
        f"{{'params': [{p.name}], 'lr': ...}}), at the rate it needs (torchgfn steps log Z "
        "at 10-100x the policy's lr)"
    )
