"""GS413 told by its mechanism: a parameter whose module ran inside a custom
autograd.Function's forward, where grad mode is off, and again with gradients on only inside
that Function's backward, which returned it no gradient. The backward differentiates only the
tensors it was handed: torchdiffeq's odeint_adjoint solves the adjoint ODE through the func
for the parameters given as `adjoint_params`, and a parameter left out of them (or held by
a func the caller lists by hand) gets None. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding
from gradscope.rules import frozen_by_no_grad
from gradscope.steps.records import ParamInfo

ADJOINT = "torchdiffeq._impl.adjoint.OdeintAdjointMethod"
"""odeint_adjoint's Function, by module and name."""


def as_told(finding: Finding, p: ParamInfo) -> Finding:
    """GS413's warning naming the Function whose backward reran its module and returned it
    nothing, with the way to hand it the parameter."""
    name = p.rerun_by.rpartition(".")[2]
    why = (
        f"its module ran inside the custom autograd.Function {name}'s forward (grad mode off) "
        f"and again with gradients on only in {name}.backward, which returned it no gradient: "
        "that backward differentiates only the tensors handed to it"
    )
    if p.rerun_by == ADJOINT:
        advice = (
            "odeint_adjoint takes the gradients of adjoint_params only: leave adjoint_params "
            "out, so that every parameter of func (an nn.Module) is taken, or list this one "
            "in it"
        )
    else:
        advice = (
            f"pass it to {name}.apply and return its gradient from {name}.backward "
            "(torch.autograd.grad of the rerun outputs with respect to it)"
        )
    return replace(finding, message=f"{finding.message}; {why}", advice=advice)


def by_function(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 named by the custom Function around its module's forwards: one whose backward
    never reran it (frozen_by_no_grad.py), or one whose backward reran it and returned it
    nothing."""
    if p.no_grad_function:
        return frozen_by_no_grad.as_never_recomputed(finding, p)
    return as_told(finding, p)
