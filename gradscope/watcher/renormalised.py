"""A softmax's probabilities normalised again as logits, read off the loss's graph.

`torch.distributions.Categorical(logits=x)` normalises its input itself, as
`x - x.logsumexp(-1, keepdim=True)`: a SubBackward0 over x and a LogsumexpBackward0 of the
same x. When x is a softmax's output (a policy network ending in `nn.Softmax` handed to
`Categorical(logits=...)`, as tianshou's default `dist_fn` and skrl's
`unnormalized_log_prob=True` do with it), the distribution is a softmax of probabilities:
its probabilities stay within [1/(1 + (C-1)e), e/(e + C - 1)], the policy can never
become sure of an action (0.73 at most for 2 of them), and its gradients are squashed. The
same holds for a log_softmax written by hand over probabilities, and for F.log_softmax of
them (a REINFORCE loss's log-probabilities taken from a policy that already ends in a
softmax) where no nll_loss reads it: cross_entropy's own is loss_inputs.py's to name. Found
by a bounded search
from the loss, whatever the objective (a policy gradient is no loss gradscope otherwise
reads); `Categorical(probs=...)` takes the log of its probabilities and is right. A softmax
straight over a softmax's output on the same axis, or a sigmoid over a sigmoid's, is the
same squashing by a loss that applies its own (MONAI's DiceLoss(softmax=True) or
sigmoid=True, monai/losses/dice.py, fed a model's probabilities): no prediction can reach 0
or 1, so the overlap never does. F.logsigmoid straight over a sigmoid's output is the
same for a logistic loss written by hand (coral_pytorch's coral_loss, a pairwise
-logsigmoid(s_i - s_j)) fed the model's probabilities: what it reads as logits stays
within (0, 1). Shapes only; nothing is read from a device.
"""

from __future__ import annotations

from typing import Any

from gradscope.autograd_walk import NodeWalk, Order, inputs, saved
from gradscope.watcher.loss_inputs import Misfed, found_below, saved_dim

SEARCH = 256
"""Nodes searched from the loss: a policy's log-probabilities sit a few ops below it."""


def find(loss_node: Any) -> Misfed | None:
    """The first x - logsumexp(x), or log_softmax(x), over a softmax's output x, both over
    the same axis."""
    if loss_node is None:
        return None
    read_by_nll: set[int] = set()  # cross_entropy's log_softmax: named as the loss's input
    for node in NodeWalk([loss_node], inputs, order=Order.NEAREST, limit=SEARCH):
        name = type(node).__name__
        if name == "NllLossBackward0":
            read_by_nll.update(id(n) for n, _ in node.next_functions if n is not None)
        if name == "LogSoftmaxBackward0" and id(node) not in read_by_nll:
            found = _log_softmax_of_softmax(node)
            if found is not None:
                return found
        if name in _SQUASH and (found := _squashed_twice(node)) is not None:
            return found
        if name == "LogSigmoidBackward0" and (found := _log_sigmoid_of_sigmoid(node)):
            return found
        if name != "SubBackward0" or len(node.next_functions) != 2:
            continue
        (x, _), (lse, _) = node.next_functions
        if type(x).__name__ != "SoftmaxBackward0" or type(lse).__name__ != "LogsumexpBackward0":
            continue
        if not lse.next_functions or lse.next_functions[0][0] is not x or not _same_axis(x, lse):
            continue
        return Misfed(
            "softmax-as-logits",
            "a softmax's probabilities, normalised again as logits by x - logsumexp(x) "
            "(Categorical(logits=...) of probabilities, or a log_softmax by hand on them)",
            None,
            x,
        )
    return None


def _log_softmax_of_softmax(node: Any) -> Misfed | None:
    """F.log_softmax over a softmax's output, on the axis the softmax normalised."""
    x = node.next_functions[0][0] if node.next_functions else None
    if type(x).__name__ != "SoftmaxBackward0" or not _same_axis(x, node):
        return None
    return Misfed(
        "softmax-as-logits",
        "a softmax's probabilities, normalised again as logits by log_softmax (a policy "
        "network that already ends in a softmax, its log-probabilities taken by log_softmax)",
        None,
        x,
    )


_SQUASH = {"SoftmaxBackward0": "softmax", "SigmoidBackward0": "sigmoid"}


def _squashed_twice(node: Any) -> Misfed | None:
    """A softmax straight over a softmax's output on the axis it normalised, or a sigmoid
    straight over a sigmoid's."""
    x = node.next_functions[0][0] if node.next_functions else None
    name = type(node).__name__
    if type(x).__name__ != name or (name == "SoftmaxBackward0" and not _same_axis(x, node)):
        return None
    op = _SQUASH[name]
    return Misfed(
        "squashed-twice",
        f"a {op} over a {op}'s probabilities (a loss that applies its own {op}, as MONAI's "
        f"DiceLoss({op}=True), fed the model's {op} output)",
        None,
        x,
    )


def _log_sigmoid_of_sigmoid(node: Any) -> Misfed | None:
    """F.logsigmoid straight over a sigmoid's output (through views and casts)."""
    x = found_below(node.next_functions[0][0] if node.next_functions else None, "SigmoidBackward0")
    if x is None:
        return None
    return Misfed(
        "sigmoid-as-log-sigmoid-logits",
        "a sigmoid's probabilities, then log-sigmoid as of logits (a logistic loss that takes "
        "logits, as coral_pytorch's coral_loss or a pairwise -logsigmoid(s_i - s_j), fed the "
        "model's sigmoid output)",
        None,
        x,
    )


def _same_axis(softmax: Any, lse: Any) -> bool:
    """The logsumexp (or log_softmax) reduced the one axis the softmax normalised."""
    result = saved(softmax, "_saved_result", None)
    ndim = getattr(result, "ndim", 0)
    dims = saved(lse, "_saved_dim", None)
    dims = (dims,) if isinstance(dims, int) else dims
    if not isinstance(dims, tuple) or len(dims) != 1:
        return False
    axis = saved_dim(saved(softmax, "_saved_dim", None), ndim)
    return axis is not None and axis == saved_dim(dims[0], ndim)
