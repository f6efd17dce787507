"""A gradient made large by its loss's units, not by the network: a force field's loss (an
energy MSE plus 100 × a force MSE, in the units of the data) is 1.6e3 at its first step, and
every gradient is large with it. An explosion grows on its way back to the input, layer by
layer; a gradient that is largest where the loss hands it to the model and shrinks on its
way back was made large by the loss's scale. The signal that travels back is read where
it is bare: a bias's gradient is the gradient of its layer's output (a weight's multiplies it
by the layer's input, which grows forward as fast as the signal grows back in an explosion:
exploding-deep's weight gradients are flat over 24 layers, its biases' grow 2000x toward the
input). There the absolute bounds are judged per unit of the loss, as they are per term of a
summed loss."""

from __future__ import annotations

from gradscope.fmt import num
from gradscope.rules.params import dense_rms
from gradscope.stats import ParamStats, RunStats

SHRINK = 2.0
"""The signal shrinks on its way back: the bias gradient RMS of the module that ran first is
at most 1/SHRINK of that of the module that ran last (nearest the loss), the largest."""


def per_unit(stats: RunStats, live: list[ParamStats]) -> tuple[float, str]:
    """The divisor of the absolute bounds (1: none) and the words that say so."""
    loss = abs(stats.loss_value) if stats.loss_value is not None else 0.0
    if not loss > 1.0 or (stats.loss_terms or 1) > 1:
        return 1.0, ""
    by_depth: dict[int, float] = {}
    for p in live:
        if p.depth is not None and p.grad_norm and p.name.endswith("bias") and len(p.shape) == 1:
            by_depth[p.depth] = max(by_depth.get(p.depth, 0.0), dense_rms(p))
    if len(by_depth) < 2:
        return 1.0, ""
    first, last = by_depth[min(by_depth)], by_depth[max(by_depth)]
    if first * SHRINK > last or max(by_depth.values()) > last:
        return 1.0, ""
    return loss, (
        f" per unit of the loss, {num(loss)}: the gradient is largest at the output (a bias's "
        f"{num(last)}) and shrinks on its way back to the input ({num(first)}), so its size is "
        "the loss's scale"
    )
