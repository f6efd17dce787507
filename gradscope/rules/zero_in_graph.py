"""GS413's advice where a tensor got gradients of exact zeros, not None, and nothing more
specific explains them (no zero-derivative op, no zero start, no shift the loss is blind
to). A graph cut gives None; zeros say the tensor is in the graph and every path from the
loss hands it 0: two terms that cancel (a pairwise ranking loss whose negative is the
positive itself: s(u, i) - s(u, i)), a mask or weight that is 0 wherever the tensor is
read, a loss whose value does not depend on it. "Check that it takes part in the loss"
sends the user looking for a cut that is not there. In a run with no backward at all
(evolution strategies, SPSA, a gradient computed in numpy), `.grad` holds only what the
script writes: the graph has no say, the script's writes do."""

from __future__ import annotations

CUT = (
    "check that it takes part in the loss (`gradscope inspect --script` shows where the graph "
    "is cut)"
)

OUTSIDE_MODELS = (
    "it is held by no nn.Module, so `gradscope inspect --script` does not measure it: find "
    "where the script reads it and make that read part of each step's graph (not inside "
    "torch.no_grad(), not through .detach(), .data or .item(), not into a tensor built once "
    "before the loop)"
)
"""CUT's words for a tensor of an optimizer that no model holds (a skew generator, a
kernel's hyper-parameter bound at the script's top): inspect follows models' parameters,
so pointing there finds nothing."""

CANCELLED = (
    "it is in the graph (a cut would give None, not zeros), yet every gradient that reaches "
    "it is exactly 0: look for terms that cancel (a score minus the same score, as a ranking "
    "loss whose sampled negative is the positive itself), a mask or weight that is 0 "
    "wherever it is read, or a loss whose value does not depend on it"
)


UNWRITTEN = (
    "no backward ran in this run, so .grad holds only what the script writes, and it wrote "
    "no gradient for this tensor: write its estimate into .grad with the others', or freeze "
    "it and leave it out of the optimizer"
)

WRITTEN_ZERO = (
    "no backward ran in this run, so .grad holds only what the script writes, and that was "
    "always 0: write each step's estimate into .grad itself (`p.grad = g`, or "
    "`p.grad.copy_(g)`); a buffer assigned to .grad once and later rebound (`g = ...`) is no "
    "longer the .grad the optimizer reads"
)


def advice(none: bool, by_hand: bool = False, in_model: bool = True) -> str:
    """The graph's advice for a gradient that was never there, the cancelling terms' for
    one that was always exactly 0; the script's writes' where no backward ran (`by_hand`);
    where to look for the cut of a tensor no model holds (not `in_model`)."""
    if by_hand:
        return UNWRITTEN if none else WRITTEN_ZERO
    if none:
        return CUT if in_model else OUTSIDE_MODELS
    return CANCELLED
