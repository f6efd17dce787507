"""What a loss that wants logits was given, read off its autograd graph.

`cross_entropy` applies its own log_softmax and `binary_cross_entropy_with_logits` its own
sigmoid. A `SoftmaxBackward0` under the first (through views, transposes and casts) or a
`SigmoidBackward0` under the second means the loss got probabilities: it squashes them
again, its gradients shrink, and it can never fall below a floor above 0, ln(1 + (C-1)/e)
for C classes (1.46 for 10) or ln(1 + 1/e) = 0.313. A softmax or log_softmax that
normalised over another axis than the loss's classes (the batch, the sequence) is read by
following that axis through the views between them. A `log_softmax` before cross_entropy
is the same loss with the same gradients: said nothing. Shapes only; nothing is read from
a device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradscope.autograd_walk import NodeWalk, Order, inputs, saved
from gradscope.watcher import cosine_logits, poisson_terms

MAX_CHAIN = 16
"""Nodes followed between the loss and the op that fed it: views, casts, a transpose."""

_SAME = {"CloneBackward0", "ToCopyBackward0", "AliasBackward0"}
_VIEWS = {"ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0"}
_FOLLOWED = _SAME | _VIEWS | {"TransposeBackward0", "PermuteBackward0"}
SIGMOID_FLOOR = math.log1p(math.exp(-1.0))
"""binary_cross_entropy_with_logits of a sigmoid's output s ∈ (0, 1), for any target in
[0, 1]: at least -log sigmoid(1) = ln(1 + 1/e) ≈ 0.3133 (a target of 0 gives at least ln 2)."""


COSINE = (
    "a product of two row-normalised inputs (F.normalize), scaled by nothing but 1, then "
    "cross_entropy's own log_softmax"
)


def softmax_floor(classes: int) -> float:
    """cross_entropy of a softmax's output over C classes: at best the true class has
    probability 1 and the rest 0, so the loss is -log(e / (e + C - 1))."""
    return math.log1p((classes - 1) / math.e)


@dataclass(frozen=True)
class Misfed:
    """Probabilities, or log-probabilities over the wrong axis, where the loss wants logits."""

    what: str
    """softmax | sigmoid | softmax-wrong-dim | log-softmax-wrong-dim | softmax-not-log (a
    softmax's probabilities where nll_loss or ctc_loss wants log-probabilities) |
    softmax-as-bce-logits (a softmax under binary_cross_entropy_with_logits) |
    rate-as-log-rate (a Poisson NLL's log-rate out of a positive link) | cosine-unscaled
    (cosine similarities as logits with no temperature)"""
    detail: str
    """The ops and axes, in words."""
    floor: float | None = None
    """The lowest value the loss can reach per target (mean reduction); None: not known."""
    node: Any = field(default=None, compare=False, repr=False)
    """The softmax, sigmoid or log_softmax node that fed it (its op's line: inspect's replay)."""


def saved_dim(value: Any, ndim: int) -> int | None:
    """A saved dim (an unsigned 64-bit -1 is -1) as a non-negative index."""
    if not isinstance(value, int) or ndim <= 0:
        return None
    if value >= 2**63:
        value -= 2**64
    return value % ndim if -ndim <= value < ndim else None


def _shape(node: Any, attr: str) -> tuple[int, ...] | None:
    value = saved(node, attr, None)
    shape: Any = getattr(value, "shape", value)
    try:
        return tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        return None


def through(node: Any, axis: tuple[tuple[int, ...], int] | None) -> Any:
    """The axis (shape, dim) of `node`'s output as its input's axis; None where a view
    mixed it with others or the node is one that is not followed."""
    if axis is None:
        return None
    shape, dim = axis
    name = type(node).__name__
    if name in _SAME:
        return axis
    if name in _VIEWS:
        before = _shape(node, "_saved_self_sym_sizes")
        if before is None:
            return None
        inner = math.prod(shape[dim + 1 :])
        for j, size in enumerate(before):
            if size == shape[dim] and math.prod(before[j + 1 :]) == inner:
                return before, j
        return None
    if name == "TransposeBackward0":
        a = saved_dim(saved(node, "_saved_dim0", None), len(shape))
        b = saved_dim(saved(node, "_saved_dim1", None), len(shape))
        if a is None or b is None:
            return None
        swapped = list(shape)
        swapped[a], swapped[b] = shape[b], shape[a]
        return tuple(swapped), b if dim == a else a if dim == b else dim
    if name == "PermuteBackward0":
        dims = [saved_dim(d, len(shape)) for d in getattr(node, "_saved_dims", ())]
        if len(dims) != len(shape) or None in dims:
            return None
        order = [0] * len(shape)
        for i, d in enumerate(dims):
            order[d or 0] = shape[i]
        return tuple(order), dims[dim]
    return None


def _follow(
    node: Any, axis: tuple[tuple[int, ...], int] | None, stop: str, rows: bool = False
) -> tuple[Any, Any]:
    """Down from `node` through views and casts (and row subsets, with `rows`: a mask's
    `x[valid]`) to a node named `stop`: that node and the loss's class axis as its
    output's (None where it was lost); (None, None) if not there."""
    for _ in range(MAX_CHAIN):
        if node is None:
            return None, None
        name = type(node).__name__
        if name == stop:
            return node, axis
        if name not in _FOLLOWED and not (rows and name in _ROWS):
            return None, None
        axis = through(node, axis)
        node = node.next_functions[0][0] if node.next_functions else None
    return None, None


def found_below(node: Any, stop: str, rows: bool = False) -> Any:
    """The node named `stop` at or below `node` through views and casts (and row subsets,
    with `rows`); None if not there."""
    return _follow(node, None, stop, rows)[0]


def _normalised(node: Any, axis: Any, what: str) -> tuple[int, int, tuple[int, ...]] | None:
    """The dim the (log_)softmax `node` normalised over, and the loss's class dim and the
    shape on the same tensor, when they differ; None when they agree or cannot be told."""
    result = saved(node, "_saved_result", None)
    shape = tuple(int(s) for s in getattr(result, "shape", ()))
    dim = saved_dim(saved(node, "_saved_dim", None), len(shape))
    if axis is None or dim is None or axis[0] != shape or axis[1] == dim:
        return None
    return dim, axis[1], shape


def _wrong_dim(op: str, found: tuple[int, int, tuple[int, ...]]) -> str:
    dim, classes, shape = found
    return (
        f"{op} over dim {dim} (size {shape[dim]}) of a {tuple(shape)} tensor whose classes, "
        f"for the loss, are dim {classes} (size {shape[classes]})"
    )


def nll_input(nll: Any, log_softmax: Any, axis: Any, classes: int | None) -> Misfed | None:
    """What fed an NLL loss over `log_softmax` (cross_entropy's own, or the user's); `axis`:
    the loss's class axis as log_softmax's output, where it was followed."""
    wrong = _normalised(log_softmax, axis, "log_softmax")
    if wrong is not None:
        return Misfed("log-softmax-wrong-dim", _wrong_dim("log_softmax", wrong), None, log_softmax)
    below = log_softmax.next_functions[0][0] if log_softmax.next_functions else None
    result = saved(log_softmax, "_saved_result", None)
    shape = tuple(int(s) for s in getattr(result, "shape", ()))
    dim = saved_dim(saved(log_softmax, "_saved_dim", None), len(shape))
    start = None if dim is None else (shape, dim)
    softmax, inner = _follow(below, start, "SoftmaxBackward0")
    if softmax is None and classes and cosine_logits.unscaled(log_softmax):
        return Misfed("cosine-unscaled", COSINE, cosine_logits.floor(classes), log_softmax)
    if softmax is None:
        return None
    wrong = _normalised(softmax, inner, "softmax")
    if wrong is not None:
        detail = _wrong_dim("softmax", wrong) + ", then cross_entropy's own log_softmax"
        return Misfed("softmax-wrong-dim", detail, None, softmax)
    floor = softmax_floor(classes) if classes and classes >= 2 else None
    detail = "softmax, then cross_entropy's own log_softmax over the same " + (
        f"{classes} classes" if classes else "classes"
    )
    return Misfed("softmax", detail, floor, softmax)


def log_probs_input(loss: Any, axis: Any, what: str) -> Misfed | None:
    """What fed a loss that wants log-probabilities (nll_loss, ctc_loss), followed from its
    input node `loss` down through views, transposes, casts and row subsets: a log_softmax
    over another axis than the loss's classes (`axis`: (shape, dim) of the loss's input),
    or a softmax with no log after it. None: a log_softmax over the classes, a log of
    anything (the user's own log-probabilities), or what cannot be followed."""
    node = loss
    for _ in range(MAX_CHAIN):
        name = type(node).__name__ if node is not None else ""
        if name == "LogSoftmaxBackward0":
            wrong = _normalised(node, axis, "log_softmax")
            if wrong is None:
                return None
            return Misfed("log-softmax-wrong-dim", _wrong_dim("log_softmax", wrong), None, node)
        if name == "SoftmaxBackward0":
            detail = f"softmax, whose probabilities {what} reads as log-probabilities"
            return Misfed("softmax-not-log", detail, None, node)
        if name not in _FOLLOWED | _ROWS:
            return None
        axis = through(node, axis)
        node = node.next_functions[0][0] if node.next_functions else None
    return None


def ctc_input(ctc: Any) -> Misfed | None:
    """What fed ctc_loss: its log_probs are (T, N, C) or (T, C), the classes last."""
    shape = _shape(ctc, "_saved_log_probs")
    if not shape or not ctc.next_functions:
        return None
    return log_probs_input(ctc.next_functions[0][0], (shape, len(shape) - 1), "ctc_loss")


def soft_target(node: Any) -> Any | None:
    """cross_entropy against probability targets (Mixup, CutMix, a teacher's soft labels)
    multiplies log_softmax by the targets: the LogSoftmaxBackward0 under a MulBackward0
    whose other factor takes no gradient and has its shape; None for any other product."""
    if type(node).__name__ != "MulBackward0" or len(inputs(node)) != 1:
        return None
    log_softmax, _ = _follow(inputs(node)[0], None, "LogSoftmaxBackward0")
    shape = _shape(log_softmax, "_saved_result") if log_softmax is not None else None
    targets = [_shape(node, "_saved_self"), _shape(node, "_saved_other")]  # the one saved
    return log_softmax if shape and [t for t in targets if t is not None] == [shape] else None


def soft_classes(log_softmax: Any) -> tuple[tuple[int, ...], int] | None:
    """A soft-target cross-entropy's class axis: log_softmax's own (shape, dim)."""
    shape = _shape(log_softmax, "_saved_result") or ()
    dim = saved_dim(saved(log_softmax, "_saved_dim", None), len(shape))
    return None if dim is None else (shape, dim)


def soft_input(log_softmax: Any) -> Misfed | None:
    """What fed a soft-target cross-entropy (a softmax under its log_softmax)."""
    axis = soft_classes(log_softmax)
    return None if axis is None else nll_input(None, log_softmax, axis, axis[0][axis[1]])


def class_axis(nll: Any) -> tuple[tuple[int, ...], int] | None:
    """The NLL loss's class axis: dim 1 of its input (dim 0 of a 1-d input)."""
    shape = _shape(nll, "_saved_self")
    if not shape:
        return None
    return shape, 1 if len(shape) >= 2 else 0


def logits_input(node: Any) -> Misfed | None:
    """A sigmoid, or a softmax (a multi-label head squashed as if one-label), under
    binary_cross_entropy_with_logits (through views, casts and row subsets: RankNet's
    valid pairs `diff[valid]`, a padded list's real entries): either hands it values in
    (0, 1), which it squashes again, so the same floor holds."""
    below = node.next_functions[0][0] if node.next_functions else None
    squash = found_below(below, "SigmoidBackward0", rows=True)
    what = "sigmoid"
    if squash is None:
        squash = found_below(below, "SoftmaxBackward0", rows=True)
        what = "softmax-as-bce-logits"
    if squash is None:
        return None
    plain = all(saved(node, attr, None) is None for attr in ("_saved_weight", "_saved_pos_weight"))
    detail = f"{what.split('-')[0]}, then binary_cross_entropy_with_logits' own sigmoid"
    return Misfed(what, detail, SIGMOID_FLOOR if plain else None, squash)


_ROWS = {"SelectBackward0", "IndexBackward0", "SliceBackward0", "IndexSelectBackward0"}
"""Between log_softmax and NLL: a subset of rows (a graph's training nodes)."""
_NLL = ("NllLossBackward0", "NllLoss2DBackward0")
MAX_SEARCH = 64
"""Nodes searched from the loss down for the loss nodes: they sit near its top."""


def first_found(loss_node: Any, read: Callable[[Any], Misfed | None], limit: int) -> Misfed | None:
    """The first reading `read` makes of a node near the top of the loss's graph (the
    `limit` nodes nearest it)."""
    if loss_node is None:
        return None
    for node in NodeWalk([loss_node], inputs, order=Order.NEAREST, limit=limit):
        found = read(node)
        if found is not None:
            return found
    return None


def find(loss_node: Any) -> list[Misfed]:
    """Every loss node near the top of the graph that was fed probabilities."""
    out: list[Misfed] = []
    ends: set[int] = set()  # a loss node, or where one was found: nothing below is searched

    def below(node: Any) -> list[Any]:
        return [] if id(node) in ends else inputs(node)

    roots = [] if loss_node is None else [loss_node]
    for node in NodeWalk(roots, below, order=Order.NEAREST, limit=MAX_SEARCH):
        name = type(node).__name__
        found, soft = None, soft_target(node)
        poisson = poisson_terms.read(node)
        if name == "BinaryCrossEntropyWithLogitsBackward0":
            found = logits_input(node)
        elif name in _NLL:
            found = _nll(node)
        elif name == "CtcLossBackward0":
            found = ctc_input(node)
        elif soft is not None:
            found = soft_input(soft)
        elif poisson is not None and poisson.misfed:
            found = Misfed(poisson.misfed, poisson.detail)
        if found is not None:
            out.append(found)
        if found is not None or name in _NLL or name == "CtcLossBackward0" or soft or poisson:
            ends.add(id(node))
    return out


def _nll(node: Any) -> Misfed | None:
    shape = _shape(node, "_saved_self")
    classes = (shape[1] if len(shape) >= 2 else shape[0]) if shape else None
    axis = class_axis(node)
    below = node.next_functions[0][0] if node.next_functions else None
    for _ in range(MAX_CHAIN):
        if below is None or type(below).__name__ == "LogSoftmaxBackward0":
            break
        if type(below).__name__ not in _FOLLOWED | _ROWS:
            return None
        axis = through(below, axis)
        below = below.next_functions[0][0] if below.next_functions else None
    if below is None or type(below).__name__ != "LogSoftmaxBackward0":
        start = node.next_functions[0][0] if node.next_functions else None
        return log_probs_input(start, class_axis(node), "nll_loss")
    return nll_input(node, below, axis, classes)
