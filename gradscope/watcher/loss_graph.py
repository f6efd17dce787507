"""The loss's kind, read off its own autograd graph at a backward call.

A walk down from the tensor backward ran on, through the nodes that only scale, sum or
reshape it (`-loss`, `loss / accumulation_steps`, `a + b`, `.mean()` of a per-sample
loss, a dtype cast), to the loss nodes torch's functional losses leave
(`NllLossBackward0` over `LogSoftmaxBackward0` is a cross-entropy, probability targets
times a `LogSoftmaxBackward0` one against soft targets; `MseLossBackward0`,
`BinaryCrossEntropyWithLogitsBackward0`, ...). Their saved reduction, input and target
give the reduction, the number of classes and the number of targets. A few dozen
nodes at most, and no value read from a device: a factor that is a device tensor is
left unknown rather than synced.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, saved
from gradscope.errors import user_line
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.taken_derivatives import reads_derivative
from gradscope.watcher import (
    gaussian_kl_terms,
    interval_bounds,
    kl_inputs,
    logistic_terms,
    loss_factors,
    loss_inputs,
    pinball_terms,
    poisson_terms,
    renormalised,
    self_scaled,
    soft_target_values,
    upstream_targets,
)
from gradscope.watcher.discover import MAX_GRAPH_NODES

MAX_NODES = 64
"""Nodes visited per loss at most: the reducing nodes above the loss nodes are few."""
MAX_TERMS = 16

_LOSS_NODES = {
    "NllLossBackward0": "nll",
    "NllLoss2DBackward0": "nll",
    "MseLossBackward0": "mse",
    "SmoothL1LossBackward0": "smooth_l1",
    "HuberLossBackward0": "huber",
    "BinaryCrossEntropyBackward0": "binary_cross_entropy",
    "BinaryCrossEntropyWithLogitsBackward0": "binary_cross_entropy_with_logits",
    "CtcLossBackward0": "ctc",
    "AbsBackward0": "l1",
}
"""`AbsBackward0`: F.l1_loss leaves no node of its own (torch decomposes it into abs, then
mean or sum), and an absolute error reduced by hand, GluonTS's quantile loss
2·|(y - ŷ)(1[y ≤ ŷ] - q)| and N-BEATS' MASE numerator are the same: ≥ 0 whatever it holds."""
_ELEMENTWISE = frozenset({"ctc", "l1"})
"""Kinds whose node keeps one value per element (or sample): reduced by the nodes above."""
_PASS = {  # nodes that hand the loss through unchanged in meaning
    "ViewBackward0",
    "ReshapeAliasBackward0",
    "UnsqueezeBackward0",
    "SqueezeBackward0",
    "SqueezeBackward1",
    "ExpandBackward0",
    "CloneBackward0",
    "ToCopyBackward0",
    "AliasBackward0",
    "SelectBackward0",
    "WhereBackward0",  # with one input: ctc_loss(zero_infinity=True)'s infinite losses set to 0
}
_ROWS = _PASS | {
    "IndexBackward0",
    "SliceBackward0",
    "IndexSelectBackward0",
    "MaskedSelectBackward0",
}
"""Between log_softmax and NLL: a subset of rows (the training nodes of a graph) is
still log-probabilities."""
_BOUNDED_INPUTS = frozenset({"cross_entropy", "nll", "binary_cross_entropy_with_logits"})
"""Kinds whose input may be interval bounds' worst-case logits (interval_bounds.py)."""
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
_REDUCING = {"MeanBackward0": "mean", "SumBackward0": "sum"}
"""A per-sample loss (reduction="none") reduced afterwards."""
_PARTIAL = {"MeanBackward1": "mean", "SumBackward1": "sum"}
"""A per-target loss node's output reduced over some of its dims (an occupancy network's BCE
summed over each shape's query points, then averaged over the shapes). Only right above a
loss node: elsewhere a sum over a dim is part of a term (soft targets' sum over classes)."""


_Branch = tuple[Any, float, str | None]
"""A node on one path down from the loss: the factor and the reduction the path applies."""


def read(
    loss: torch.Tensor, scaled: bool = False, derivatives: frozenset[int] = frozenset()
) -> LossKind:
    """The loss's terms; unrecognised branches are counted, never guessed. Where a term
    was fed probabilities (loss_inputs.py), the user's line that called backward.
    `derivatives`: the result nodes of autograd.grad calls taken with create_graph."""
    found: list[LossTerm] = []
    nodes: list[Any] = []  # the loss node of each term read from one (none for smoothing)
    unknown = 0
    roots: list[_Branch] = [] if loss.grad_fn is None else [(loss.grad_fn, 1.0, None)]
    walk = NodeWalk(
        roots, lambda b: _below(b) or [], order=Order.FIRST_INPUT, limit=MAX_NODES, key=None
    )
    for node, factor, reduced in walk:  # every path: a term reached twice counts twice
        if len(found) >= MAX_TERMS:
            unknown += 1
            break
        name = type(node).__name__
        if name in _LOSS_NODES:
            found.append(_term(node, _LOSS_NODES[name], factor, reduced))
            nodes.append(node)
        elif (written := _written_out(node, factor, reduced)) is not None:
            found.append(written)
            nodes.append(node)
        elif _below((node, factor, reduced)) is None:
            smoothing = _smoothing(node, factor, reduced)
            if smoothing is None:
                unknown += 1
            else:
                found.append(smoothing)
                nodes.append(None)
    unknown += walk.pending  # reached past the bound: not read, counted unknown
    paired = logistic_terms.log_derivatives(nodes)  # a sigmoid's log-derivative: no loss
    if paired:
        found = [t for i, t in enumerate(found) if i not in paired]
        nodes = [n for i, n in enumerate(nodes) if i not in paired]
        unknown += len(paired)
    found = _own_targets(found, nodes)
    again = _renormalised(loss)
    where = user_line() if again is not None or any(t.misfed for t in found) else None
    derivative = _differentiated(loss, derivatives)
    kind = LossKind(tuple(found[:MAX_TERMS]), unknown, scaled, where, derivative, again)
    return replace(kind, self_scaled=self_scaled.find(loss.grad_fn))


def _written_out(node: Any, factor: float, reduced: str | None) -> LossTerm | None:
    """A loss written out of plain ops at `node` (the logistic loss, a pinball loss, a
    Poisson NLL, a Gaussian KL), or None."""
    if type(node).__name__ in logistic_terms.LOGISTIC:
        by = factor * logistic_terms.sign(node)
        return LossTerm(logistic_terms.KIND, reduced or "none", by)
    if pinball_terms.holds(node):
        return LossTerm(pinball_terms.KIND, reduced or "none", factor)
    if (poisson := poisson_terms.read(node)) is not None:
        misfed, by = (poisson.misfed, poisson.detail), factor * poisson.sign
        return LossTerm(poisson_terms.KIND, reduced or "none", by, None, None, *misfed)
    if (kl := gaussian_kl_terms.read(node)) is not None:
        reduction = reduced or kl.reduction or "none"
        return LossTerm(gaussian_kl_terms.KIND, reduction, factor * kl.weight)
    return None


def _renormalised(loss: torch.Tensor) -> LossTerm | None:
    """A softmax's probabilities normalised again as logits below the loss, whatever its
    terms (renormalised.py), or read by kl_div as log-probabilities (kl_inputs.py), as a
    term of no sum: what fed it, in words."""
    found = renormalised.find(loss.grad_fn)
    kind = "policy"
    if found is None:
        found, kind = kl_inputs.find(loss.grad_fn), "kl_div"
    if found is None:
        return None
    return LossTerm(kind, "none", 1.0, misfed=found.what, misfed_detail=found.detail)


_PAIRED = frozenset({"mse", "l1", "smooth_l1", "huber"})
"""Distances between two tensors, whose target may be the model's own output, detached."""


def _own_targets(terms: list[LossTerm], nodes: list[Any]) -> list[LossTerm]:
    """Marks a distance term whose target shares its storage with another term's input:
    the target is that input, detached. VQ-VAE's codebook loss ‖sg(z) - e‖² and commitment
    loss ‖z - sg(e)‖² each target the other's input: the encoder's output and the codebook
    are pulled toward each other, and both move as the model learns (the sum can rise
    while it does). Storages only: no value is read."""
    inputs = [_storage(saved(n, "_saved_self", None)) if n is not None else None for n in nodes]
    out = []
    for i, (term, node) in enumerate(zip(terms, nodes, strict=True)):
        target = _storage(saved(node, "_saved_target", None)) if node is not None else None
        others = {p for j, p in enumerate(inputs) if j != i and p is not None}
        if term.kind in _PAIRED and target is not None and target in others:
            term = replace(term, own_target=True)
        if term.kind in upstream_targets.KINDS and upstream_targets.on_input_path(node):
            term = replace(term, upstream_target=True)
        out.append(term)
    return out


def _storage(tensor: Any) -> int | None:
    """Where a tensor's storage starts (a detached tensor shares its source's); None for
    anything without one (a sparse or wrapped tensor, an empty one)."""
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
        return None
    try:
        pointer = int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    return pointer or None


def _differentiated(loss: torch.Tensor, derivatives: frozenset[int]) -> bool:
    """The loss's graph holds a gradient taken with create_graph (rules/derivative_bias.py):
    the whole graph walked, up to the bound every walk of it has."""
    roots = [] if loss.grad_fn is None else [loss.grad_fn]
    return reads_derivative(NodeWalk(roots, limit=MAX_GRAPH_NODES), derivatives)


def _below(branch: _Branch) -> list[_Branch] | None:
    """The branches under a node that only scales, sums or reshapes the loss ([] under a
    loss node); None for any other node (a smoothing term, or unknown)."""
    node, factor, reduced = branch
    name = type(node).__name__
    if name in _LOSS_NODES or name in logistic_terms.LOGISTIC:
        return []
    if pinball_terms.holds(node) or poisson_terms.read(node) or gaussian_kl_terms.read(node):
        return []
    inputs = [n for n, _ in node.next_functions if n is not None]
    if name in _PASS and len(inputs) == 1:
        return [(inputs[0], factor, reduced)]
    if name == "NegBackward0" and len(inputs) == 1:
        return [(inputs[0], -factor, reduced)]
    if name in _REDUCING and len(inputs) == 1:
        return [(inputs[0], factor, reduced or _REDUCING[name])]
    if name in _PARTIAL and len(inputs) == 1 and _over_loss(inputs[0]):
        return [(inputs[0], factor, _reduced(reduced, _PARTIAL[name]))]
    if name == "MulBackward0" and loss_inputs.soft_target(node) is not None:
        return None  # targets times log-probabilities: a term (_smoothing reads it)
    if name in ("MulBackward0", "MulBackward1", "DivBackward0") and len(inputs) == 1:
        if name == "DivBackward0":  # a denominator of 0 makes no factor: inf or NaN
            by = loss_factors.constant(saved(node, "_saved_other", None))
            return [(inputs[0], factor * (1.0 / by if by else math.nan), reduced)]
        return [(inputs[0], factor * loss_factors.constant(loss_factors.held(node)), reduced)]
    if name in ("AddBackward0", "SubBackward0"):
        alpha = loss_factors.constant(saved(node, "_saved_alpha", 1))
        signs = (1.0, -alpha if name == "SubBackward0" else alpha)
        pairs = zip(node.next_functions, signs, strict=False)
        return [(child, factor * sign, reduced) for (child, _), sign in pairs if child is not None]
    return None


def _over_loss(node: Any) -> bool:
    """The node is a loss node, or only scales one (a constant factor, a negation, a
    reshape): a sum over some dims there is still the loss's own reduction (GluonTS's
    `2 * abs(...)` summed over the quantiles)."""
    for _ in range(4):
        name = type(node).__name__
        if name in _LOSS_NODES or pinball_terms.holds(node):
            return True
        below = _below((node, 1.0, None))
        if name in _REDUCING or name in _PARTIAL or below is None or len(below) != 1:
            return False
        node = below[0][0]
    return False


_SMOOTHING_CHAIN = {"SumBackward0", "SumBackward1", "MeanBackward0", "MaskedFillBackward0"}


def _smoothing(node: Any, factor: float, reduced: str | None) -> LossTerm | None:
    """cross_entropy(label_smoothing=ε)'s second term: -Σ_c log_softmax summed or
    averaged over the targets (a division by their count), which is ≥ 0 like the
    cross-entropy it smooths. None for anything else."""
    negations, reduction = 0, reduced or "sum"
    for _ in range(8):
        if node is None:
            return None
        name = type(node).__name__
        if name == "LogSoftmaxBackward0":
            if negations % 2 == 0:
                return None
            result = saved(node, "_saved_result", None)
            if not isinstance(result, torch.Tensor) or result.dim() == 0:
                return None
            dim = loss_inputs.saved_dim(saved(node, "_saved_dim", -1), result.dim())
            if dim is None:
                return None
            classes = int(result.shape[dim])  # dim=-1 is saved as 2**64 - 1
            count = result.numel() // max(classes, 1)
            return LossTerm("label_smoothing", reduction, factor, classes, count)
        if name == "MulBackward0":  # -Σ targets · log_softmax: the sign so far is its own
            return _soft_target(node, -factor if negations % 2 == 0 else factor, reduction)
        if name == "NegBackward0":
            negations += 1
        elif name in ("DivBackward0", "DivBackward1"):
            reduction = "mean"  # divided by the number of targets counted
        elif name not in _SMOOTHING_CHAIN:
            return None
        inputs = [n for n, _ in node.next_functions if n is not None]
        if len(inputs) != 1:
            return None
        node = inputs[0]
    return None


def _soft_target(node: Any, factor: float, reduction: str) -> LossTerm | None:
    """cross_entropy against probability targets: -Σ targets · log_softmax, summed or
    averaged over the rows. Its floor is the targets' entropy, not 0 or ln C of a guess
    (their values are read only for a negative entry: soft_target_values.py): a kind of its
    own, bounded below by 0."""
    log_softmax = loss_inputs.soft_target(node)
    if log_softmax is None:
        return None
    axis = loss_inputs.soft_classes(log_softmax)
    if axis is None:
        return None
    classes = axis[0][axis[1]]
    count = math.prod(axis[0]) // max(classes, 1)
    misfed = loss_inputs.nll_input(None, log_softmax, axis, classes) or soft_target_values.read(
        node
    )
    if misfed is None:
        return LossTerm("soft_cross_entropy", reduction, factor, classes, count)
    floor = misfed.floor if reduction == "mean" else None
    what = (misfed.what, misfed.detail, floor)
    return LossTerm("soft_cross_entropy", reduction, factor, classes, count, *what)


def _reduced(outer: str | None, partial: str) -> str:
    """The reduction of a loss reduced over some dims, then (`outer`) over the rest: a sum
    over either is a sum (a mean over shapes of sums over points grows with the points)."""
    return "sum" if "sum" in (outer, partial) else "mean"


def _term(node: Any, kind: str, factor: float, reduced: str | None) -> LossTerm:
    reduction = _REDUCTIONS.get(saved(node, "_saved_reduction", 1), "mean")
    if reduction == "none" or kind in _ELEMENTWISE:  # per element or sample: reduced above
        reduction = reduced or "none"
    classes = count = None
    target = saved(node, "_saved_target", None)
    if isinstance(target, torch.Tensor):
        count = int(target.numel())
    source = saved(node, "_saved_self", None)
    misfed = None
    if kind == "nll":
        if isinstance(source, torch.Tensor) and source.dim() >= 1:
            classes = int(source.shape[1] if source.dim() >= 2 else source.shape[0])
        log_probs = node.next_functions[0][0] if node.next_functions else None
        axis = loss_inputs.class_axis(node)
        for _ in range(MAX_NODES):  # bounded, like every walk of the graph
            if log_probs is None or type(log_probs).__name__ not in _ROWS:
                break
            axis = loss_inputs.through(log_probs, axis)
            log_probs = log_probs.next_functions[0][0]
        if type(log_probs).__name__ == "LogSoftmaxBackward0":
            kind = "cross_entropy"  # NLL of log_softmax: bounded below by 0
            misfed = loss_inputs.nll_input(node, log_probs, axis, classes)
        elif node.next_functions:
            start, at = node.next_functions[0][0], loss_inputs.class_axis(node)
            misfed = loss_inputs.log_probs_input(start, at, "nll_loss")
    elif kind == "ctc":
        log_probs = saved(node, "_saved_log_probs", None)
        shape = tuple(log_probs.shape) if isinstance(log_probs, torch.Tensor) else ()
        classes = int(shape[-1]) if len(shape) >= 2 else None
        lengths = saved(node, "_saved_target_lengths", None)
        count = len(lengths) if isinstance(lengths, (list, tuple)) else count
        misfed = loss_inputs.ctc_input(node)
    elif kind.startswith("binary"):
        classes = 2
        if kind == "binary_cross_entropy_with_logits":
            misfed = loss_inputs.logits_input(node)
    radius = interval_bounds.radius(node) if kind in _BOUNDED_INPUTS else None
    if misfed is None:
        return LossTerm(kind, reduction, factor, classes, count, radius=radius)
    floor = misfed.floor if reduction == "mean" else None  # a sum's floor needs the count
    return LossTerm(
        kind, reduction, factor, classes, count, misfed.what, misfed.detail, floor, radius=radius
    )
