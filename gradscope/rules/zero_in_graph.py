"""GS413's advice where a tensor got gradients of exact zeros, not None, and nothing more
specific explains them (no zero-derivative op, no zero start, no shift the loss is blind
to). A graph cut gives None; zeros say the tensor is in the graph and every path from the
loss hands it 0: two terms that cancel (a pairwise ranking loss whose negative is the
positive itself: s(u, i) - s(u, i)), a mask or weight that is 0 wherever the tensor is
read, a loss whose value does not depend on it. "Check that it takes part in the loss"
sends the user looking for a cut that is not there. In a run with no backward at all
(evolution strategies, SPSA, a gradient computed in numpy), `.grad` holds only what the
script writes: the graph has no say, the script's writes do. A tensor no module holds (a
simulation's physical parameters, a trajectory's controls) that no backward ever reached is
not read by the loss at all: the loss reads a copy made from its values, a tensor made
anew each iteration, or reads it where the graph is cut; `inspect --script`, which
measures modules' parameters, has nothing to show there."""

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

LOOSE = (
    "it is held by no nn.Module and no backward reached it: the loss reads another tensor, a "
    "copy made from its values (torch.tensor(x.item(), requires_grad=True), "
    "x.detach().clone().requires_grad_()), a tensor created anew each iteration after the "
    "optimizer took this one, or a read cut from the graph (inside torch.no_grad(), through "
    ".detach(), .data or .item(), into a tensor built once before the loop); compute each "
    "step's loss from this very tensor (functions of it, such as x.exp(), keep the graph)"
)
"""CUT's words for a tensor of an optimizer no module holds (a simulation's physical
parameters, a skew generator bound at the script's top): `inspect --script` measures modules'
parameters, so pointing there finds nothing."""

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


def advice(none: bool, by_hand: bool = False, held: bool = True) -> str:
    """The graph's advice for a gradient that was never there, the cancelling terms' for
    one that was always exactly 0; the script's writes' where no backward ran (`by_hand`);
    a copy's or a re-created tensor's for one no module holds (not `held`)."""
    if by_hand:
        return UNWRITTEN if none else WRITTEN_ZERO
    if none and not held:
        return LOOSE
    return CUT if none else CANCELLED
