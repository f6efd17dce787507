"""A loss term divided by its own magnitude with that magnitude attached, read off the
loss's graph.

TD3+BC's actor loss is `-lmbda * Q.mean() + mse(pi, a)` with `lmbda = alpha /
Q.abs().mean().detach()`: the normaliser is a number, so the Q term keeps Q's gradient at
a scale that does not depend on Q's. Without the detach the term is `alpha * Q.mean() /
Q.abs().mean()`, which no scaling of Q changes: its gradient in each Q_i is
`(sum|Q| - sign(Q_i) * sum Q) / (sum|Q|)^2`, exactly 0 wherever the batch's Q values share
a sign (the usual case: the returns are all positive, or all negative), so the policy
learns the behaviour-cloning term only. The same holds for `x.mean() / x.norm()` or
`x.sum() / x.abs().sum()` under any objective. Found as a product or quotient at whose two
sides sit the mean (or sum) of a tensor and the reciprocal of a magnitude (mean or sum of
its abs, its norm) of the same tensor's node, or as a mean or sum over the tensor times
that reciprocal (`(lmbda * Q).mean()`). Shapes only; nothing is read from a device.
A normaliser detached, or a tensor centred before it is divided by its spread (an
advantage's `(A - A.mean()) / A.std()`), is not this."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gradscope.autograd_walk import inputs

SEARCH = 256
"""Nodes searched from the loss: an actor loss's Q term sits a few ops below it."""
_PASS = frozenset({"NegBackward0", "ViewBackward0", "SqueezeBackward0", "SqueezeBackward1"})
"""Ops that keep a scalar's dependence on its input as it is (up to a fixed sign)."""
_SCALE = frozenset({"MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1"})
"""Products and quotients: by a constant or a detached tensor when only one side is traced."""
_REDUCE = frozenset({"MeanBackward0", "MeanBackward1", "SumBackward0", "SumBackward1"})
_ABS = frozenset({"AbsBackward0"})
_NORM = frozenset({"LinalgVectorNormBackward0", "NormBackward0", "NormBackward1"})


def find(loss_node: Any) -> str | None:
    """The first term below `loss_node` that is a tensor's mean or sum divided by an
    attached magnitude of the same tensor, in words; None where there is none."""
    if loss_node is None:
        return None
    for node in _nodes(loss_node):
        if (spread := _reduced_ratio(node)) is not None:
            return spread
        for top, bottom in _quotients(node):
            value = _value_of(top)
            if value is not None and _magnitude_of(bottom) is value:
                return f"{_op(top)} of a tensor divided by its {_op(bottom)}, both traced"
    return None


def _reduced_ratio(node: Any) -> str | None:
    """`(lmbda * Q).mean()` with lmbda = alpha / Q.abs().mean(): a mean or sum over a
    tensor times the reciprocal of its own magnitude (or divided by it)."""
    name, under = type(node).__name__, inputs(node)
    if name not in _REDUCE or len(under) != 1:
        return None
    for top, bottom in _quotients(_through(under[0])):
        size = _magnitude_of(bottom)
        if size is not None and _through(top) is _through(size):
            return f"{_op(node)} of a tensor divided by its {_op(bottom)}, both traced"
    return None


def _quotients(node: Any) -> list[tuple[Any, Any]]:
    """(numerator, denominator) of a quotient, or of a product with a reciprocal on either
    side, both traced; none for any other node."""
    edges = [n for n, _ in getattr(node, "next_functions", ())]
    if len(edges) != 2 or any(e is None for e in edges):
        return []
    name = type(node).__name__
    if name == "DivBackward0":
        return [(edges[0], edges[1])]
    if name == "MulBackward0":
        return [(a, r) for a, b in (edges, edges[::-1]) if (r := _reciprocal_of(b)) is not None]
    return []


def _nodes(root: Any) -> Iterator[Any]:
    seen, stack = {id(root)}, [root]
    while stack and len(seen) <= SEARCH:
        node = stack.pop()
        yield node
        for n in inputs(node):
            if id(n) not in seen:
                seen.add(id(n))
                stack.append(n)


def _through(node: Any) -> Any:
    """Below ops that only fix a sign, a view or a constant scale (at most 8)."""
    for _ in range(8):
        name = type(node).__name__
        under = inputs(node)
        if name in _PASS and len(under) == 1:
            node = under[0]
        elif name in _SCALE and len(under) == 1:
            node = under[0]
        else:
            break
    return node


def _value_of(node: Any) -> Any:
    """The tensor's node whose mean or sum `node` is; None otherwise."""
    node = _through(node)
    under = inputs(node)
    return under[0] if type(node).__name__ in _REDUCE and len(under) == 1 else None


def _reciprocal_of(node: Any) -> Any:
    node = _through(node)
    under = inputs(node)
    if type(node).__name__ == "ReciprocalBackward0" and len(under) == 1:
        return under[0]
    return None


def _magnitude_of(node: Any) -> Any:
    """The tensor's node whose magnitude (mean or sum of its abs, its norm) `node` is."""
    node = _through(node)
    name, under = type(node).__name__, inputs(node)
    if len(under) != 1:
        return None
    if name in _NORM:
        return under[0]
    if name in _REDUCE and type(under[0]).__name__ in _ABS:
        inner = inputs(under[0])
        return inner[0] if len(inner) == 1 else None
    return None


def _op(node: Any) -> str:
    name = type(_through(node)).__name__
    if name in _NORM:
        return "norm"
    if name in _REDUCE:
        word = "mean" if name.startswith("Mean") else "sum"
        under = inputs(_through(node))
        return f"{word} of abs" if under and type(under[0]).__name__ in _ABS else word
    return name
