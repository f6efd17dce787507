"""GS413's advice where a tensor got gradients of exact zeros, not None, and nothing more
specific explains them (no zero-derivative op, no zero start, no shift the loss is blind
to). A graph cut gives None; zeros say the tensor is in the graph and every path from the
loss hands it 0: two terms that cancel (a pairwise ranking loss whose negative is the
positive itself: s(u, i) - s(u, i)), a mask or weight that is 0 wherever the tensor is
read, a loss whose value does not depend on it. "Check that it takes part in the loss"
sends the user looking for a cut that is not there."""

from __future__ import annotations

CUT = (
    "check that it takes part in the loss (`gradscope inspect --script` shows where the graph "
    "is cut)"
)

CANCELLED = (
    "it is in the graph (a cut would give None, not zeros), yet every gradient that reaches "
    "it is exactly 0: look for terms that cancel (a score minus the same score, as a ranking "
    "loss whose sampled negative is the positive itself), a mask or weight that is 0 "
    "wherever it is read, or a loss whose value does not depend on it"
)


def advice(none: bool) -> str:
    """The graph's advice for a gradient that was never there, the cancelling terms' for
    one that was always exactly 0."""
    return CUT if none else CANCELLED
