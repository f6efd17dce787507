"""A softmax's probabilities where `kl_div` wants log-probabilities, read off the loss's graph.

`F.kl_div(input, target)` (and `nn.KLDivLoss`) reads its input as log-probabilities: it
computes target·(log target - input), or exp(target)·(target - input) with
`log_target=True`. Handed a softmax's output instead (the classic knowledge-distillation
slip, `kl_div(softmax(s / T), softmax(t / T))`), the loss is Σ target·p + const, least
when the input puts all its probability on the target's top class: the student learns
the teacher's argmax, not its distribution, and the loss goes below 0. The graph shows it:
a SubBackward0 from a constant (xlogy(t, t)) less a MulBackward0 of the target and the
softmax, or a MulBackward0 of a constant (exp(t)) and a SubBackward0 from a constant less
the softmax, summed or averaged. A log_softmax there is right. Shapes only; nothing is read
from a device, but for the one check of a log_target=True target: probabilities there
(every value within [0, 1]) are no log-probabilities (all at most 0), and pull the student
toward a near-uniform distribution.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gradscope.autograd_walk import SAME_VALUES, saved
from gradscope.fmt import num
from gradscope.watcher.loss_inputs import MAX_CHAIN, Misfed, first_found, saved_dim

SEARCH = 64
"""Nodes searched from the loss: kl_div's reduction sits a few ops below it."""

_PASSED = SAME_VALUES
"""Ops between the softmax and kl_div that leave its values probabilities."""

ROUNDING = 1e-3
"""exp of a probability rounded past 0 or 1 (a bfloat16 teacher's)."""

_REDUCTIONS = {"SumBackward0", "SumBackward1", "MeanBackward0", "MeanBackward1"}
_TARGET_TERMS = {None, "XlogyBackward0"}
"""What the first operand of kl_div's subtraction may be: a constant (the target takes no
gradient) or xlogy(t, t) of a target that does."""


def find(loss_node: Any) -> Misfed | None:
    """The first kl_div near the top of the loss's graph whose input is a softmax's output."""
    return first_found(loss_node, read, SEARCH)


def read(node: Any) -> Misfed | None:
    """`node`, a sum or mean, reduces a kl_div whose input is a softmax's probabilities."""
    if type(node).__name__ not in _REDUCTIONS or not node.next_functions:
        return None
    pointwise = node.next_functions[0][0]
    softmax = _plain(pointwise) or _log_target(pointwise)
    if softmax is None:
        return _probability_target(pointwise)
    return Misfed(
        "softmax-kl-input",
        "a softmax's output p; kl_div's Σ target·(log target - p) is least with all of p "
        "on the target's top class, so the model learns the target's argmax, not its "
        "distribution, and the loss goes below 0",
        None,
        softmax,
    )


def _plain(node: Any) -> Any | None:
    """target·(log target - input): xlogy(t, t) - t·input, its input a softmax."""
    if _name(node) != "SubBackward0" or len(node.next_functions) != 2:
        return None
    (first, _), (product, _) = node.next_functions
    if _name(first) not in _TARGET_TERMS or _name(product) != "MulBackward0":
        return None
    return _softmax(product.next_functions[1][0]) if len(product.next_functions) == 2 else None


def _log_target(node: Any) -> Any | None:
    """exp(target)·(target - input) (log_target=True), its input a softmax."""
    if _name(node) != "MulBackward0" or len(node.next_functions) != 2:
        return None
    (scale, _), (difference, _) = node.next_functions
    if _name(scale) not in {None, "ExpBackward0"} or _name(difference) != "SubBackward0":
        return None
    return _softmax(difference.next_functions[1][0])


def _probability_target(node: Any) -> Misfed | None:
    """exp(target)·(target - log_softmax(x)) (log_target=True) whose exp(target) lies within
    [1, e] everywhere: a target within [0, 1], probabilities where log-probabilities (all
    at most 0) are meant. The loss then pulls the input toward softmax(target), near uniform.
    A by-hand KL, p·(log p - log_softmax(x)), saves p there: probabilities that sum to 1
    over at least 2 classes, never all of them 1 or more, whatever mask or weight scales
    them below 1. One read of the saved factor."""
    if _name(node) != "MulBackward0" or len(node.next_functions) != 2:
        return None
    (scale, _), (difference, _) = node.next_functions
    if _name(scale) not in {None, "ExpBackward0"} or _name(difference) != "SubBackward0":
        return None
    log_softmax = _through(difference.next_functions[1][0], "LogSoftmaxBackward0")
    result = saved(log_softmax, "_saved_result", None) if log_softmax is not None else None
    exp_target = saved(node, "_saved_self", None)
    shape = getattr(result, "shape", None)
    dim = saved_dim(saved(log_softmax, "_saved_dim", None), len(shape or ()))
    if shape is None or dim is None or getattr(exp_target, "shape", None) != shape:
        return None
    if shape[dim] < 2 or exp_target.numel() == 0:
        return None
    low, high = (float(v) for v in torch.aminmax(exp_target.detach().float()))
    if low < 1 - ROUNDING or high > math.e + ROUNDING:
        return None
    return Misfed(
        "probs-as-log-target",
        f"a target within [0, 1] (its exp {num(low)}-{num(high)}), probabilities: with "
        "log_target=True kl_div reads its target as log-probabilities, so it pulls the "
        "input toward softmax(target), near uniform over the "
        f"{shape[dim]} classes",
    )


def _softmax(node: Any) -> Any | None:
    """The SoftmaxBackward0 at `node` or under it through views and casts."""
    return _through(node, "SoftmaxBackward0")


def _through(node: Any, stop: str) -> Any | None:
    """The node named `stop` at `node` or under it through views and casts."""
    for _ in range(MAX_CHAIN):
        name = _name(node)
        if name == stop:
            return node
        if name not in _PASSED:
            return None
        node = node.next_functions[0][0] if node.next_functions else None
    return None


def _name(node: Any) -> str | None:
    return None if node is None else type(node).__name__
