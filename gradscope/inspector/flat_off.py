"""Parameters every path from the loss reaches through one zero-derivative op (`torch.sign`,
`round`, `floor`, ...) or one custom autograd.Function: a binarised or quantised layer
without a straight-through estimator gets all-zero gradients by torch's definition of the
op's derivative, not from a dead ReLU or a mask (GS106 names the op). A parameter behind
both a step function and a custom Function (GDN's beta, bounded below by one, under the
quantiser's round) is told of the step function: its zeros are certain, the Function's
backward may pass the gradient on."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from gradscope.autograd_walk import CUSTOM_FUNCTION, NodeWalk, flat_op
from gradscope.inspector import weighted_off


def names(model: nn.Module, loss: torch.Tensor) -> tuple[tuple[str, str], ...]:
    """(parameter, op) for the parameters behind that op on every path; read before the
    backward frees the graph."""
    root = loss.grad_fn
    if root is None:
        return ()
    return behind(model, loss, NodeWalk([root], limit=weighted_off.LIMIT))


def behind(
    model: nn.Module, loss: torch.Tensor, nodes: Iterable[Any]
) -> tuple[tuple[str, str], ...]:
    """`names`, from the loss's graph `nodes` already walked (the inspector's own walk of
    the whole graph): one type test a node where no such op is."""
    found = {op for node in nodes if (op := flat_op(node)) is not None}
    ops = sorted(found, key=lambda op: (op.startswith(CUSTOM_FUNCTION), op))  # certain first
    out: list[tuple[str, str]] = []
    for op in ops:
        behind = weighted_off.names(model, loss, _through(op))
        out += [(name, op) for name in behind if all(name != n for n, _ in out)]
    return tuple(out)


def _through(op: str) -> Callable[[Any], bool]:
    """The test of a node that differentiates `op`."""
    return lambda node: flat_op(node) == op
