"""The KL divergence of a diagonal Gaussian from another, written by hand, read off a loss's
graph: a VAE's or a CVAE's (ACT's) `-0.5 * (1 + logvar - mu² - exp(logvar))`, and
torch.distributions' Normal-Normal `0.5 * (r + t - 1 - log r)`. Both are a sum of
`exp(L) - L` (or `X - log X`) and squares, each ≥ 0 after the constant: a KL is never below
0, so a loss that subtracts it ascends it (the latent's posterior pushed away from the
prior), and a weight of 0 on it leaves the latent unregularised. Only the nodes are read:
an `exp` whose input is itself a term of the same sum with the opposite sign, the other
terms squares beside the `exp` or constants. No value is read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gradscope.autograd_walk import saved
from gradscope.watcher import loss_factors

KIND = "gaussian_kl"
CANONICAL = 0.5
"""The coefficient of exp(logvar) (or of the variance ratio) in the KL as defined: any other
constant in front of it is a weight the script put there."""
MAX_LEAVES = 12
"""Terms of the sum at most: the KL has four or five."""
_VIEWS = {"ViewBackward0", "ReshapeAliasBackward0", "SqueezeBackward0", "SqueezeBackward1"}
_REDUCING = {
    "SumBackward0": "sum",
    "SumBackward1": "sum",
    "MeanBackward0": "mean",
    "MeanBackward1": "mean",
}
_Edge = tuple[Any, int]


@dataclass(frozen=True)
class GaussianKL:
    """A Gaussian KL at a node: its weight (the constants around it, over the canonical
    0.5; negative where the expression is the KL negated) and how it was reduced."""

    weight: float
    reduction: str | None


def read(node: Any) -> GaussianKL | None:
    """The Gaussian KL `node` computes, through the reductions, reshapes and constant
    factors above its sum; None for anything else."""
    scale, reduction = 1.0, None
    for _ in range(8):
        name = type(node).__name__
        inputs = [n for n, _ in node.next_functions if n is not None]
        if len(inputs) != 1:
            break
        if name in _REDUCING:
            reduction = "sum" if "sum" in (reduction, _REDUCING[name]) else "mean"
        elif name == "NegBackward0":
            scale = -scale
        elif name in ("MulBackward0", "MulBackward1"):
            scale *= loss_factors.constant(loss_factors.held(node))
        elif name not in _VIEWS:
            break
        node = inputs[0]
    if not math.isfinite(scale) or scale == 0:
        return None  # an unread factor, or a weight of 0 the walk above reads as its own
    coefficient = _kl_sum(node)
    if coefficient is None:
        return None
    return GaussianKL(scale * coefficient / CANONICAL, reduction)


def _kl_sum(node: Any) -> float | None:
    """The coefficient of exp(L) (or X) in a sum c·(exp(L) - L + squares + constant), where
    every term pairs up that way, all with one sign; None if the sum holds anything else."""
    leaves = _leaves(node)
    if leaves is None:
        return None
    values = {_value(e): c for e, c in leaves.items()}
    pairs = {e: c for e, c in leaves.items() if _partner(e) in values}
    pairs = {e: c for e, c in pairs.items() if math.isclose(values[_partner(e)], -c)}
    signs = {c > 0 for c in pairs.values()}
    if len(signs) != 1:
        return None  # no exp beside its input, or pairs of both signs
    paired = {_value(e) for e in pairs} | {_partner(e) for e in pairs}
    coefficient = next(iter(pairs.values()))
    for edge, c in leaves.items():
        if _value(edge) in paired:
            continue
        if not _square(edge[0]) or c * coefficient <= 0:
            return None  # a term that is no square beside the exp, or one subtracted
    return coefficient


def _partner(edge: _Edge) -> Any:
    """The value that pairs with this term: L under exp(L); log X for X (None otherwise)."""
    if type(edge[0]).__name__ == "ExpBackward0":
        return _value(_inner(edge))
    return ("LogBackward0", _value(edge))


def _value(edge: _Edge) -> Any:
    """What the edge computes, the same for one op applied twice to one input: `2 * logstd`
    inside exp and beside it, `std.pow(2)` and the log of another `std.pow(2)`; a log by its
    input's value, so X and log X meet."""
    node = edge[0]
    name = type(node).__name__
    inputs = [e for e in node.next_functions if e[0] is not None]
    if len(inputs) != 1:
        return edge
    if name == "LogBackward0":
        return (name, _value(inputs[0]))
    constant = None
    if name in ("MulBackward0", "MulBackward1"):
        constant = loss_factors.constant(loss_factors.held(node))
    elif name == "PowBackward0":
        constant = loss_factors.constant(saved(node, "_saved_exponent", None))
    if constant is None or not math.isfinite(constant):
        return edge
    return (name, constant, _value(inputs[0]))


def _inner(edge: _Edge) -> _Edge:
    """The input edge of a one-input node (exp, log)."""
    child, number = edge[0].next_functions[0]
    return (child, number)


def _square(node: Any) -> bool:
    """x ** 2, or x * x."""
    name = type(node).__name__
    if name == "PowBackward0":
        return loss_factors.constant(saved(node, "_saved_exponent", None)) == 2
    if name == "MulBackward0":
        edges = node.next_functions
        return len(edges) == 2 and edges[0][0] is not None and edges[0] == edges[1]
    return False


def _leaves(node: Any) -> dict[_Edge, float] | None:
    """The terms of a sum of sums and differences, by the edge they come from, with their
    signed coefficients; a constant added is left out. None past MAX_LEAVES."""
    out: dict[_Edge, float] = {}
    stack: list[tuple[Any, int, float]] = [(node, 0, 1.0)]
    while stack:
        current, number, sign = stack.pop()
        name = type(current).__name__
        if name in ("AddBackward0", "SubBackward0", "AddBackward1", "SubBackward1"):
            alpha = loss_factors.constant(saved(current, "_saved_alpha", 1))
            signs = (sign, -sign * alpha if name.startswith("Sub") else sign * alpha)
            for (child, nr), s in zip(current.next_functions, signs, strict=False):
                if child is not None:
                    stack.append((child, nr, s))
        elif name == "RsubBackward1":  # 1 - x
            stack.append((current.next_functions[0][0], current.next_functions[0][1], -sign))
        elif name == "NegBackward0":
            stack.append((current.next_functions[0][0], current.next_functions[0][1], -sign))
        else:
            out[(current, number)] = out.get((current, number), 0.0) + sign
        if len(out) > MAX_LEAVES or not math.isfinite(sign):
            return None
    return out if len(out) >= 2 else None
