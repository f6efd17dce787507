"""The logistic loss read off a loss's graph: -log sigmoid(x) (`-F.logsigmoid(x)`) or its
equal softplus(-x) (`F.softplus(x)`), bounded below by 0 as a binary cross-entropy is.
Negative sampling (word2vec, knowledge-graph embeddings), noise-contrastive estimation
and pairwise preferences minimise it; a log sigmoid entering the loss with a plus sign is the
objective negated. Not where log sigmoid(x) and log sigmoid(-x) of one x are both read: their sum
is log sigmoid'(x), a sigmoid's log-derivative (a flow's log-determinant), not a loss."""

from __future__ import annotations

from typing import Any

LOGISTIC = {"LogSigmoidBackward0": -1.0, "SoftplusBackward0": 1.0}
"""The node, and the sign that turns its output into the loss ≥ 0 (log sigmoid ≤ 0)."""
KIND = "logistic_loss"


def sign(node: Any) -> float:
    """The factor that makes the node's output the logistic loss ≥ 0."""
    return LOGISTIC[type(node).__name__]


def log_derivatives(nodes: list[Any]) -> set[int]:
    """Positions (in `nodes`, None for a term without a node) of the logistic nodes whose
    input is another one's input negated: log sigmoid(x) + log sigmoid(-x), a log-derivative."""
    bases: dict[int, list[tuple[int, bool]]] = {}
    for i, node in enumerate(nodes):
        if node is None or type(node).__name__ not in LOGISTIC:
            continue
        below, negated = _input(node), False
        if below is not None and type(below).__name__ == "NegBackward0":
            below, negated = _input(below), True
        if below is not None:
            bases.setdefault(id(below), []).append((i, negated))
    paired: set[int] = set()
    for found in bases.values():
        if len({negated for _, negated in found}) == 2:
            paired.update(i for i, _ in found)
    return paired


def _input(node: Any) -> Any:
    inputs = [n for n, _ in node.next_functions if n is not None]
    return inputs[0] if len(inputs) == 1 else None
