"""GS489: a straight-through estimator written without its .detach(), where the tensor
under it still gets a gradient. `x + (q(x) - x)` adds x and subtracts it again, so the
identity's gradient, the estimator's whole point, is 1 - 1 = 0; what reaches x comes only
through q's own differentiable part. Where q has none (a one-hot of an argmax) x gets exact
zeros and GS413 names the sum; where it has some (a ternary quantiser's scale, the mean of
|w|) x learns only through it: a rank-one shadow of its gradient, no error anywhere. The sum
is read off the first backward graphs (watcher/flat_ops.py, x's side only). No torch."""

from __future__ import annotations

from gradscope.autograd_walk import CANCELLED
from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_setup import got_grad
from gradscope.steps.records import WatchRun

SHOWN = 4
"""Tensors named in the message; the rest are counted."""


@rule(
    "GS489",
    "ste-not-detached",
    Severity.WARNING,
    "none-grad",
    Stage.WATCH,
    "watch: a straight-through estimator written without .detach() (x + (q(x) - x)): the "
    "tensors under it learn only through q's own derivative",
    example="ternary weights `w + (alpha(w) * sign(w) * mask - w)` with alpha the mean of "
    "the kept |w|: w's gradient comes through alpha alone, a scalar's",
    fix="detach the difference, `w + (q(w) - w).detach()`, so that the forward takes the "
    "quantised value and the backward the identity's gradient",
    objectives="any: the graph's arithmetic, not the loss's value",
)
def ste_not_detached(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The tensors that require grad, lie under the x of an `x + (y - x)` in the graphs read,
    and got a gradient (those with only zeros are GS413's): one finding for them all."""
    under = [
        p.name
        for i, p in enumerate(run.params)
        if p.flat_op == CANCELLED and p.requires_grad and got_grad(run, i)
    ]
    if not under:
        return []
    more = f" and {len(under) - SHOWN} more" if len(under) > SHOWN else ""
    names = ", ".join(under[:SHOWN]) + more
    return [
        this.finding(
            under[0],
            f"{names} {'reach' if len(under) > 1 else 'reaches'} the loss through "
            "x + (q(x) - x), a straight-through estimator "
            "without its .detach(): the identity's gradient cancels (1 - 1 = 0), so they "
            "learn only through q's own derivative",
            "detach the difference, x + (q(x) - x).detach(), so that the forward takes the "
            "quantised value and the backward passes the gradient straight through",
            evidence=(f"x + (y - x) lies between {under[0]} and the loss",),
        )
    ]
