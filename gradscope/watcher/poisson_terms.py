"""The Poisson negative log-likelihood read off a loss's graph: exp(x) - y·x for a log-rate x
(`F.poisson_nll_loss(x, y)`, `PoissonNLLLoss(log_input=True)`, or the same written by hand)
and μ - y·log(μ + ε) for a rate μ (log_input=False). Count models (Poisson regression, a GLM
with an exposure offset, the rate of a zero-inflated or hurdle model) minimise it.

Its input says what the model must output: a log-rate takes any real value. A log-rate that
comes out of a positive link (exp, softplus, relu) is a rate read as a log-rate: the predicted
rate is exp(exp(z)), never below 1, so the zero counts most count data is made of can never
be fitted, and the run still looks like one that learns. No value is read: only the nodes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradscope.autograd_walk import saved

KIND = "poisson_nll"
POSITIVE_LINKS = {"ExpBackward0": "exp", "SoftplusBackward0": "softplus", "ReluBackward0": "relu"}
"""Ops whose output is never below 0: fed as a log-rate, the rate is at least 1."""
_VIEWS = {
    "ViewBackward0",
    "ReshapeAliasBackward0",
    "UnsqueezeBackward0",
    "SqueezeBackward0",
    "SqueezeBackward1",
    "CloneBackward0",
    "ToCopyBackward0",
    "AliasBackward0",
}
"""Between a positive link and the loss: the same values, reshaped."""


@dataclass(frozen=True)
class PoissonTerm:
    """A Poisson NLL node (the subtraction) and what feeds it: `misfed` names a rate fed
    where a log-rate is wanted (None: a log-rate, or a rate under log_input=False)."""

    misfed: str | None = None
    detail: str = ""
    sign: float = 1.0
    """1: the NLL as written; -1: the log-likelihood, which the loss negates to minimise it."""


def read(node: Any) -> PoissonTerm | None:
    """The Poisson NLL whose subtraction `node` is, or None: exp(x) - y·x (a log-rate x, the
    same node under the exp and the product) or μ - y·log(μ [+ ε]) (a rate μ); or the
    log-likelihood y·x - exp(x) (y·log μ - μ) written the other way round, its `sign` -1."""
    if type(node).__name__ != "SubBackward0" or saved(node, "_saved_alpha", 1) != 1:
        return None
    children = [n for n, _ in node.next_functions]
    if len(children) != 2 or any(c is None for c in children):
        return None
    for sign, (rate, product) in ((1.0, children), (-1.0, children[::-1])):
        found = _nll(rate, product)
        if found is not None:
            return replace(found, sign=sign)
    return None


def _nll(rate: Any, product: Any) -> PoissonTerm | None:
    """exp(x) - y·x or μ - y·log μ, from its two sides."""
    times = _one_input(product) if type(product).__name__ == "MulBackward0" else None
    if times is None:
        return None
    if type(rate).__name__ == "ExpBackward0" and _one_input(rate) is times:
        return PoissonTerm(*_misfed(times))
    if type(times).__name__ == "LogBackward0":
        inner = _one_input(times)
        if inner is not None and type(inner).__name__ == "AddBackward1":  # log(μ + ε)
            inner = _one_input(inner)
        if inner is rate:
            return PoissonTerm()
    return None


def _misfed(log_rate: Any) -> tuple[str | None, str]:
    """A log-rate that comes out of a positive link, through views: a rate fed as one."""
    node = log_rate
    for _ in range(8):
        name = type(node).__name__
        if name in POSITIVE_LINKS:
            link = POSITIVE_LINKS[name]
            return "rate-as-log-rate", (
                "the Poisson NLL exp(x) - y·x reads x as a log-rate (poisson_nll_loss with "
                f"log_input=True), and x comes out of {link}, which is never below 0: every "
                "predicted rate is "
                "at least 1 (exp of it), so counts of 0 can never be fitted"
            )
        if name not in _VIEWS:
            return None, ""
        node = _one_input(node)
        if node is None:
            return None, ""
    return None, ""


def _one_input(node: Any) -> Any:
    """The node's only input that needs a gradient (a target or a constant has none)."""
    inputs = [n for n, _ in node.next_functions if n is not None]
    return inputs[0] if len(inputs) == 1 else None
