"""A bias that gets no gradient because the loss reads its model only through a derivative
(GS101, GS413).

A loss built on `torch.autograd.grad(output, input, create_graph=True)` (a Hamiltonian
network's time derivatives, a force field's forces -dE/dx) reaches the weights through that
derivative's own graph, whose nodes are named `...BackwardBackward0`. The output layer's
bias moves the output by a constant, whose derivative with respect to the input is 0: no
path leads from the loss to it, and its gradient stays None while its layer's weight
learns. Nothing is cut: the output (an energy, a Hamiltonian) is defined up to that
constant. A bias None beside a weight that learned happens in no first-order graph, where
every layer's output reaches its bias as it reaches its weight.

So does any leaf the differentiated output reaches through sums, gathers and reshapes only (a
per-species energy shift: taken_derivatives.py): it moves the output by an amount that depends
on no input. A leaf behind a layer (a filter network fed distances the script detached) is no
such offset: its None is a cut, and stays one.
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.rules import shift_invariance
from gradscope.steps.records import WatchRun


def learned_weight(run: WatchRun, i: int) -> str | None:
    """The weight beside bias i when the bias never had a gradient, the weight got one, and
    a loss of the run read the model through a derivative; None otherwise."""
    j = shift_invariance.sibling_weight(run, i)
    if j is None or run.tensors.ever_had_grad(i) or not run.tensors.got_grad(j):
        return None
    return run.params[j].name if _reads_derivative(run) else None


def as_told(run: WatchRun, i: int, finding: Finding, steps: int) -> Finding | None:
    """GS413's `finding` on tensor i, which never had a gradient in `steps` steps, told as
    information where a loss of the run read the model through a derivative and i is a bias
    beside a weight that learned, or only adds to the output differentiated; None otherwise."""
    head = f"{run.params[i].name} got no gradient (None) in all {steps} steps"
    weight = learned_weight(run, i)
    if weight is not None:
        return as_information(finding, head, weight)
    offset = run.params[i].derivative_offset and not run.tensors.ever_had_grad(i)
    return as_offset(finding, head) if offset and _reads_derivative(run) else None


def _reads_derivative(run: WatchRun) -> bool:
    kinds = [run.loss_kind(k) for k in range(len(run.optimizers))]
    return any(k is not None and k.derivative for k in kinds)


def explanation(weight: str, did: str = "learned") -> str:
    return (
        f"while {weight} {did}: the loss reads the model only through a gradient of its "
        "output with respect to its input, taken into the graph (autograd.grad with "
        "create_graph=True, torch.func.grad), and this bias adds a constant to that output, "
        "whose derivative is 0, so nothing is cut"
    )


ADVICE = (
    "nothing to fix: the output is defined up to a constant (an energy, a Hamiltonian); "
    "`bias=False` on that layer drops the parameter, or a loss term on the output's own "
    "value (an energy's) gives it a gradient"
)


def as_information(finding: Finding, head: str, weight: str, did: str = "learned") -> Finding:
    """`finding` said as information: `head` (what the bias got), then why."""
    message = f"{head} {explanation(weight, did)}"
    return replace(finding, severity=Severity.INFO, message=message, advice=ADVICE)


OFFSET_ADVICE = (
    "nothing to fix: an output read only through its derivative is defined up to that amount "
    "(an energy's per-species shift); fit it beforehand and keep it as a buffer, or a loss "
    "term on the output's own value (an energy's) gives it a gradient"
)


def as_offset(finding: Finding, head: str) -> Finding:
    """`finding` said as information: `head` (what the leaf got), then why."""
    message = (
        f"{head}: it only adds to an output the script differentiated with create_graph "
        "(through sums, gathers and reshapes), by an amount that depends on no input, and the "
        "loss reads the model only through that derivative, whose part for it is 0, so "
        "nothing is cut"
    )
    return replace(finding, severity=Severity.INFO, message=message, advice=OFFSET_ADVICE)
