"""A loss term on a derivative taken without create_graph (GS467): a force field's forces
-dE/dx by `torch.autograd.grad(E.sum(), pos)` (retain_graph=True, create_graph left False)
come back outside the graph, so a force loss built on them is a constant: the energy term
trains alone. The watcher sees, at the steps whose loss it reads, that autograd.grad ran
without create_graph (grad mode on) on an output the loss's graph reaches, and that the
loss adds a term that requires no grad. A derivative only logged (an energy-only fit that
reports its force error) adds no such term; an evaluation's forces reach no loss; a gradient
with respect to the weights (read for a log, a per-task surgery) is not a derivative of this
kind; nor is one with respect to latents the graph computed that the loss reads again after
it (IODINE's refinement inputs: the next iterate's feature, its own derivative dropped as the
reference does). Not told apart: forces only logged beside an energy loss summed onto a
tensor made outside the graph (`torch.zeros(()) + term`), whose zero is such a term; a penalty
on the derivative beside such a refinement. Where the derivative's input was written in place
after it (a learned optimizer's `theta.add_(update)` under no_grad, L2O's optimizee), the
update is what left the graph, and the finding says so. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about
from gradscope.steps.records import WatchRun


@rule(
    "GS467",
    "derivative-no-graph",
    Severity.WARNING,
    "none-grad",
    Stage.WATCH,
    "watch: a loss term on a derivative taken without create_graph (forces -dE/dx by "
    "autograd.grad with create_graph=False) is a constant that trains nothing",
    example="`f = -torch.autograd.grad(e.sum(), pos, retain_graph=True)[0]` in training, "
    "then `loss = w_e * mse(e, e_ref) + w_f * mse(f, f_ref)`",
    fix="pass create_graph=True to torch.autograd.grad in training (False only in evaluation)",
    objectives=(
        "any: whether a term the loss adds was computed in the graph, read from the graph's "
        "structure, not from the loss's value"
    ),
)
def derivative_not_in_graph(
    run: WatchRun, t: Thresholds, *, this: Rule = DECLARED
) -> list[Finding]:
    """At a step whose loss was read, the script had taken torch.autograd.grad without
    create_graph, grad mode on, of an output the loss's graph reaches (the energy), and the
    loss adds a term that requires no grad: the derivative's own term, computed outside the
    graph. Its gradient is cut: only the other terms train."""
    steps = run.derivative_cut_at
    if not steps:
        return []
    if run.derivative_moved:
        return [about(_written_in_place(this, steps), list(steps))]
    finding = this.finding(
        "autograd.grad",
        f"at step {steps[0]} the loss adds a term that requires no grad, and the script took "
        "torch.autograd.grad without create_graph of an output this loss also reads: a term "
        "on that derivative (forces -dE/dx) is computed outside the graph, a constant, so "
        "only the loss's other terms train the model",
        "pass create_graph=True to torch.autograd.grad in training (keep False in evaluation, "
        "under torch.enable_grad())",
        evidence=(f"steps read with it: {', '.join(map(str, steps))}",),
    )
    return [about(finding, list(steps))]


def _written_in_place(this: Rule, steps: tuple[int, ...]) -> Finding:
    """The derivative's input was written in place after it was taken: the update that
    read the derivative left the graph, and the later losses read the new values as
    constants, so whatever computed the update (a learned optimizer) gets no gradient."""
    return this.finding(
        "autograd.grad",
        f"at step {steps[0]} the loss reads a tensor the script differentiated by "
        "torch.autograd.grad and then wrote in place (an update applied under no_grad, "
        "`theta.add_(step)`): the update is outside the graph, so whatever computed it (a "
        "learned optimizer's network) gets no gradient from the losses after it",
        "build the updated weights out of place (`theta = theta + step`, a new tensor in the "
        "graph) for as many steps as the meta-loss unrolls, and detach them at truncation",
        evidence=(f"steps read with it: {', '.join(map(str, steps))}",),
    )
