"""A weight whose gradient is below vanish-norm while its own layer's bias gets one above it:
the backward signal reached the layer (a bias's gradient is that signal, summed), and the
weight's is small because it is the signal times the layer's input, which is near zero (a
capsule network's decoder reads squashed vectors that start near 0 and grow as the margin
loss lengthens them). No gradient vanished on its way back; said as information."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.fmt import num
from gradscope.stats import ParamStats, RunStats

ADVICE = (
    "nothing to fix if the layer's input grows as training goes (vectors that start near 0 "
    "by design); if it stays near 0, look at what feeds the layer (a dead or masked input)"
)


def layer_bias(p: ParamStats, stats: RunStats, floor: float) -> ParamStats | None:
    """The bias of p's own layer, where p is its weight and the bias's gradient is at least
    `floor` and finite; None otherwise."""
    if not p.name.endswith("weight") or len(p.shape) < 2:
        return None
    name = p.name.removesuffix("weight") + "bias"
    bias = next((q for q in stats.params if q.name == name and q.module == p.module), None)
    if bias is None or not bias.finite or (bias.grad_norm or 0.0) < floor:
        return None
    return bias


def as_information(finding: Finding, p: ParamStats, bias: ParamStats) -> Finding:
    """`finding` on p said as information: the signal reached its layer; its input is small."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{finding.message}, while its layer's bias {bias.name} gets {num(bias.grad_norm)}: "
            "the gradient reaches the layer, and the weight's is small because the layer's "
            "input is near zero (a weight's gradient is that input times the bias's)"
        ),
        advice=ADVICE,
    )
