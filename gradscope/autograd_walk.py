"""Every walk of an autograd graph, in one place: depth first with an explicit stack, or
breadth first (a search of what sits nearest the loss) with a queue.

A recursive walk overflows Python's stack on a long chain (a recurrent loop of 100,000
steps), so none recurses. Callers say what they need: the order a node's inputs are
taken in, a bound on the nodes visited, whether a node reached twice is visited twice
(a walk that carries a factor down each path), and what lies below a node (nothing: the
walk is pruned there); a caller stops the walk by leaving its loop. No torch here: a
backward node is any object with `next_functions`.
"""

from __future__ import annotations

import collections
import enum
import math
import sysconfig
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Order(enum.Enum):
    """Which of a node's inputs is visited first."""

    LAST_INPUT = "last-input"
    """Depth first, a node's last input first (what a plain stack pops); a node reached
    again later is skipped."""
    FIRST_INPUT = "first-input"
    """Depth first, a node's first input first (the order a recursive walk takes)."""
    REACHED = "reached"
    """Each node is put on the stack once, when first reached (the stack holds at most
    every node once); they are visited as the stack pops them, the last input first."""
    NEAREST = "nearest"
    """Breadth first: the nodes nearest the roots first, a node's first input first; a node
    reached again later is skipped (what a search near the loss for its loss node needs)."""


FLAT_OPS = {
    "SignBackward0": "torch.sign",
    "RoundBackward0": "torch.round",
    "RoundBackward1": "torch.round",
    "FloorBackward0": "torch.floor",
    "CeilBackward0": "torch.ceil",
    "TruncBackward0": "torch.trunc",
}
"""Backward nodes of ops whose derivative is 0 wherever it is defined (step functions):
everything below them gets exact zeros, by torch's definition."""

CANCELLED = "x + (y - x)"
"""How `flat_op` names a sum that adds a tensor and subtracts it again (a straight-through
estimator written without its .detach(): soft + (hard - soft)): its derivative in x is
1 - 1 = 0, so everything below x that reaches the loss only there gets exact zeros."""

TIMES_ZERO = "a multiplication by the constant 0"
"""How `flat_op` names `0. * x` (a product with a constant scalar 0): it keeps x in the graph
and hands it exact zeros (brevitas's runtime-stats scaling writes `stats + 0. * self.value`
while it collects statistics, so that the value's gradient is 0, not None)."""

ZERO_POINT = "the zero point of a learnable fake quantizer"
"""How the zero-point input of torch's learnable fake quantizer
(`_fake_quantize_learnable_per_tensor_affine`, `..._per_channel_affine`: torch.ao's
`_LearnableFakeQuantize`, LSQ+) is named: its derivative is nonzero only where an input
falls outside the quantised range, so it gets exact zeros wherever nothing is clipped."""

ZERO_POINT_NODES = (
    "FakeQuantizeLearnablePerTensorAffineBackward0",
    "FakeQuantizeLearnablePerChannelAffineBackward0",
)
"""Backward nodes of the learnable fake quantizer: inputs (x, scale, zero_point)."""

SAME_VALUES = frozenset(
    {
        "CloneBackward0",
        "ToCopyBackward0",
        "AliasBackward0",
        "ViewBackward0",
        "ReshapeAliasBackward0",
        "UnsafeViewBackward0",
        "TransposeBackward0",
        "PermuteBackward0",
    }
)
"""Nodes whose output holds their input's values, copied, viewed or reordered: a reading of
what a tensor holds (probabilities, cosines) passes through them."""

CUSTOM_FUNCTION = "Function "
"""How `flat_op` names a custom autograd.Function: its backward is the user's own."""

WHERE_UNCHOSEN = "torch.where (a branch never chosen)"
"""How a leaf behind a torch.where branch its condition never chose is named
(watcher/unchosen_branches.py): GS413 tells its zeros as that branch's."""


_LIBRARIES = tuple(
    {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    | {str(Path(__file__).parent)}
)


def flat_op(node: Any) -> str | None:
    """The zero-derivative op (`torch.sign`) or the user's own custom Function (`Function
    SignSTE`: an installed library's, a checkpoint's or a fused kernel's, is trusted) this
    node differentiates; None for any other node."""
    op = FLAT_OPS.get(type(node).__name__)
    if op is not None:
        return op
    if cancelled_term(node) is not None:
        return CANCELLED
    if _times_zero(node):
        return TIMES_ZERO
    forward = getattr(node, "_forward_cls", None)
    if forward is None or not _users(forward):
        return None
    return f"{CUSTOM_FUNCTION}{forward.__name__}"


def cancelled_term(node: Any) -> Any | None:
    """The node x of an AddBackward0 of x and (y - x), in either order, both with alpha 1
    (the same node x added once and subtracted once); None for any other node."""
    if type(node).__name__ != "AddBackward0" or len(node.next_functions) != 2:
        return None
    if saved(node, "_saved_alpha", 1) != 1:
        return None
    for (x, _), (sub, _) in (node.next_functions, node.next_functions[::-1]):
        if x is None or type(sub).__name__ != "SubBackward0" or len(sub.next_functions) != 2:
            continue
        if sub.next_functions[1][0] is x and saved(sub, "_saved_alpha", 1) == 1:
            return x
    return None


def _times_zero(node: Any) -> bool:
    """A MulBackward0 whose constant factor (no graph behind it) is a CPU scalar equal to 0:
    a Python number wraps as one, and reading it waits on no device."""
    if type(node).__name__ != "MulBackward0" or len(node.next_functions) != 2:
        return False
    factors = zip(("_saved_self", "_saved_other"), node.next_functions, strict=True)
    return any(edge is None and _zero_scalar(saved(node, name)) for name, (edge, _) in factors)


def _zero_scalar(value: Any) -> bool:
    if getattr(value, "ndim", None) != 0 or getattr(value, "is_cpu", False) is not True:
        return False
    return not value.is_complex() and value.item() == 0


def _users(cls: type) -> bool:
    """Its backward is written in the user's code: a script, a project's module (not the
    standard library's, an installed package's or gradscope's)."""
    code = getattr(getattr(cls, "backward", None), "__code__", None)
    path = getattr(code, "co_filename", None)
    return not isinstance(path, str) or not path.startswith(_LIBRARIES)


def saved(node: Any, name: str, default: Any = None) -> Any:
    """A node's saved value (`_saved_self`, `_saved_dim`, ...), or `default` where it has
    none or an earlier backward freed it: a graph that reaches a previous batch's (a hidden
    state carried across batches without .detach()) holds freed nodes, and reading one
    raises, in gradscope's hook, the error the script's own backward raises next. A tensor
    saved under the script's saved-tensor hooks is `default` too: unpacking it runs them
    (a checkpoint recomputes its region, and selective checkpointing's cache, read once,
    then fails the script's own backward; an offloader may free its copy when read)."""
    try:
        if _unpacked_by_hooks(getattr(node, "_raw" + name, None)):
            return default
        return getattr(node, name, default)
    except RuntimeError:
        return default


def _unpacked_by_hooks(raw: Any) -> bool:
    """A SavedTensor (or a list of them) with an unpack hook of the script's."""
    items = raw if isinstance(raw, (list, tuple)) else (raw,)
    return any(getattr(s, "unpack_hook", None) is not None for s in items)


def inputs(node: Any) -> list[Any]:
    """The backward nodes `node` hands gradients to (None edges left out)."""
    return [n for n, _ in getattr(node, "next_functions", ()) if n is not None]


class NodeWalk(Generic[T]):
    """Iterate the nodes (or any items `below` expands) reachable from `roots`.

    `below(item)` gives what lies under an item, read after the loop's body for it ran
    (empty: pruned there). `key` names a node for "visited once" (None: every path is
    walked, a shared node once per path). `limit` bounds the items visited; `pending`
    then says how many were reached but not visited."""

    def __init__(
        self,
        roots: Iterable[T],
        below: Callable[[T], Iterable[T]] = inputs,
        *,
        order: Order = Order.LAST_INPUT,
        limit: int | None = None,
        key: Callable[[T], Hashable] | None = id,
    ) -> None:
        self._roots = list(roots)
        self._below, self._order, self._limit, self._key = below, order, limit, key
        self._stack: list[T] | collections.deque[T] = []
        self.visited = 0
        """Items yielded so far."""

    @property
    def pending(self) -> int:
        """Items reached but not visited: those left by the bound (or by a loop that stopped;
        a node reached twice, by two edges, counts twice)."""
        return len(self._stack)

    def __iter__(self) -> Iterator[T]:
        if self._order is Order.REACHED:
            return self._reached()
        if self._order is Order.NEAREST:
            return self._nearest()
        return self._depth_first()

    def _depth_first(self) -> Iterator[T]:
        # one tight loop: it runs once per node of graphs of thousands
        key, below, first = self._key, self._below, self._order is Order.FIRST_INPUT
        limit = math.inf if self._limit is None else self._limit
        stack, seen, visited = self._stack, set(), 0
        stack.extend(reversed(self._roots) if first else self._roots)
        while stack and visited < limit:
            item = stack.pop()
            if key is not None:
                k = key(item)
                if k in seen:
                    continue
                seen.add(k)
            visited += 1
            self.visited = visited
            yield item
            if below is inputs:  # the common case, without a call
                under = [n for n, _ in getattr(item, "next_functions", ()) if n is not None]
            else:
                under = list(below(item))
            if first:
                under.reverse()
            stack.extend(under)

    def _nearest(self) -> Iterator[T]:
        key, below = self._key, self._below
        limit = math.inf if self._limit is None else self._limit
        queue, seen, visited = collections.deque(self._roots), set(), 0
        self._stack = queue
        while queue and visited < limit:
            item = queue.popleft()
            if key is not None:
                k = key(item)
                if k in seen:
                    continue
                seen.add(k)
            visited += 1
            self.visited = visited
            yield item
            queue.extend(below(item))

    def _reached(self) -> Iterator[T]:
        key, below = self._key or id, self._below
        limit = math.inf if self._limit is None else self._limit
        stack, visited = self._stack, 0
        stack.extend(_unique(self._roots, key))
        seen = {key(r) for r in stack}
        while stack and visited < limit:
            item = stack.pop()
            visited += 1
            self.visited = visited
            yield item
            if below is inputs:  # the common case, without a call
                under = [n for n, _ in getattr(item, "next_functions", ()) if n is not None]
            else:
                under = list(below(item))
            for b in under:
                k = key(b)
                if k not in seen:
                    seen.add(k)
                    stack.append(b)


def _unique(items: list[T], key: Callable[[T], Hashable]) -> list[T]:
    seen: set[Hashable] = set()
    out = []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out


def backward_nodes(
    tensors: Iterable[Any], *, order: Order = Order.LAST_INPUT, limit: int | None = None
) -> NodeWalk[Any]:
    """The backward nodes behind these tensors (those without a grad_fn add none)."""
    roots = [t.grad_fn for t in tensors if getattr(t, "grad_fn", None) is not None]
    return NodeWalk(roots, order=order, limit=limit)
