"""Derivatives a script takes into the graph with `torch.autograd.grad(..., create_graph=True)`
(a force field's forces -dE/dx, a Hamiltonian network's time derivatives), and the leaves that
only add to the output differentiated.

A loss on such a derivative is known by its graph, but not always by its nodes' names: autograd
names a node `...BackwardBackward` only where a backward formula has a derivative node of its
own (tanh's, softplus's); a formula made of ordinary ops (a Linear's mm, SiLU's sigmoid and mul,
an index's index_put) records nodes named as a forward's. The nodes autograd.grad returned are
kept, by identity, until the next backward reads its loss's graph.

A leaf the differentiated output reaches through sums, gathers and reshapes only (a
per-species energy shift) adds to it an amount that depends on no input: its derivative is 0,
so a loss read only through the derivative gives it no gradient, by design.

A derivative taken without create_graph (grad mode on) comes back outside the graph: where
the next loss reaches the output differentiated and adds a term that requires no grad, that
term is the derivative's, a constant (rules/step_derivative_cut.py).
"""

from __future__ import annotations

import collections
import contextlib
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, inputs

SECOND_ORDER = "BackwardBackward"
"""In the name of the nodes of a backward formula that has a derivative node of its own."""

HELD = 64
"""Result nodes kept at most between two backward calls (a rollout takes one per step)."""

READS = 8
"""autograd.grad calls whose output's graph is read for the leaves that only add to it."""

NEAR = 4
"""Nodes of a differentiated output's graph nearest it that stand for it (its own, a sum's
below it): the loss may read the output itself (E) where the script differentiated E.sum()."""

WALKED = 4096
"""Nodes walked at most in one output's additive part."""

LATENT_WALK = 256
"""Nodes walked at most below a differentiated input, for a parameter that computed it."""

ADDITIVE = frozenset(
    {
        "AddBackward0",
        "AddBackward1",
        "SubBackward0",
        "SubBackward1",
        "SumBackward0",
        "SumBackward1",
        "MeanBackward0",
        "MeanBackward1",
        "IndexBackward0",
        "IndexAddBackward0",
        "IndexSelectBackward0",
        "GatherBackward0",
        "ScatterAddBackward0",
        "ViewBackward0",
        "ReshapeAliasBackward0",
        "UnsafeViewBackward0",
        "ExpandBackward0",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "SqueezeBackward4",
        "UnsqueezeBackward0",
        "SelectBackward0",
        "SliceBackward0",
        "CatBackward0",
        "StackBackward0",
        "CloneBackward0",
        "NegBackward0",
        "ToCopyBackward0",
        "AccumulateGrad",
    }
)
"""Nodes whose output is a sum, a selection or a rearrangement of their inputs: a leaf below
them alone moves the output by an amount of its own."""


class TakenDerivatives:
    """The result nodes of the latest derivatives taken with create_graph, and the leaves
    that only add to the outputs differentiated (by weak reference)."""

    def __init__(self) -> None:
        self._nodes: collections.deque[Any] = collections.deque(maxlen=HELD)
        self._plain: collections.deque[Any] = collections.deque(maxlen=HELD)
        """The outputs' nodes of derivatives taken with grad mode on, without create_graph."""
        self._refinable: collections.deque[tuple[Any, int]] = collections.deque(maxlen=HELD)
        """Their inputs' nodes where weights computed them (latents, not data), each with
        the sequence number of the output differentiated: a node made after it read later."""
        self.offsets: dict[int, weakref.ref[torch.Tensor]] = {}
        self.reads = 0
        self._versions: collections.deque[tuple[Any, int]] = collections.deque(maxlen=HELD)
        """Their inputs, weakly, each with its version when differentiated."""
        self.moved = False
        """At a loss `cut_from` named, an input of such a derivative had been written in
        place since (a learned optimizer's update `theta.add_(step)` under no_grad)."""

    def note(self, outputs: Any, results: Any) -> None:
        """An autograd.grad call with create_graph=True gave `results` for `outputs`."""
        for r in _tensors(results):
            if r.grad_fn is not None:
                self._nodes.append(r.grad_fn)
        if self.reads < READS:
            self.reads += 1
            roots = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
            for leaf in _additive_leaves(roots):
                self.offsets.setdefault(id(leaf), weakref.ref(leaf))

    def note_plain(self, outputs: Any, inputs: Any = ()) -> None:
        """An autograd.grad call without create_graph, grad mode on, differentiated `outputs`
        with respect to `inputs`."""
        roots = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
        near = NodeWalk(roots, order=Order.NEAREST, limit=NEAR)  # E.sum()'s sum, then E
        self._plain.extend(n for n in near if type(n).__name__ != "AccumulateGrad")
        made = max((r._sequence_nr() for r in roots), default=-1)
        latents = [t.grad_fn for t in _tensors(inputs) if t.grad_fn and _made_by_weights(t)]
        self._refinable.extend((node, made) for node in latents)
        self._versions.extend((weakref.ref(t), t._version) for t in _tensors(inputs))

    def cut_from(self, loss: torch.Tensor) -> bool:
        """The loss adds a term that requires no grad, and its graph reaches an output the
        script differentiated without create_graph since the last backward: a loss on that
        derivative (forces taken without create_graph) is a constant that trains nothing.
        Not where the loss reads again, after that output was made, an input the graph had
        computed: the derivative fed the next iterate of those latents (IODINE's refinement
        inputs, a learned optimiser's), a feature whose own derivative is dropped by design,
        and the constant is some other term's (a sum started at 0)."""
        if not self._plain or loss.grad_fn is None or not _adds_constant(loss.grad_fn):
            return False
        plain = {id(n) for n in self._plain}
        walked = list(NodeWalk([loss.grad_fn], limit=WALKED))
        cut = any(id(n) in plain for n in walked) and not self._refined(walked)
        self.moved = self.moved or (cut and self._written_since())
        return cut

    def _written_since(self) -> bool:
        """An input of a derivative taken without create_graph was written in place after
        it: the derivative fed an update made outside the graph, so the loss's constant
        term is the weights' own values, not a lost derivative term."""
        return any((t := ref()) is not None and t._version != at for ref, at in self._versions)

    def _refined(self, walked: list[Any]) -> bool:
        """A node of the loss's graph made after an output differentiated without
        create_graph reads that derivative's input directly: the input was updated again."""
        made = {id(node): at for node, at in self._refinable}
        for node in walked:
            after = node._sequence_nr() if hasattr(node, "_sequence_nr") else -1
            if any(after > made.get(id(n), after) for n in inputs(node)):
                return True
        return False

    def held(self) -> frozenset[int]:
        """The ids of the result nodes kept since the last `clear`."""
        return frozenset(id(n) for n in self._nodes)

    def clear(self) -> None:
        """A backward read them: nothing of that graph is kept past it."""
        self._nodes.clear()
        self._plain.clear()
        self._refinable.clear()
        self._versions.clear()

    def offset(self, tensor: torch.Tensor) -> bool:
        """This leaf only adds to an output the script differentiated with create_graph."""
        ref = self.offsets.get(id(tensor))
        return ref is not None and ref() is tensor


@contextlib.contextmanager
def recorded() -> Iterator[TakenDerivatives]:
    """torch.autograd.grad, for the block, notes the derivatives taken with create_graph (a
    model's forward that returns forces); the function is restored at exit."""
    taken = TakenDerivatives()
    original = torch.autograd.grad

    def grad(outputs: Any, inputs: Any, *args: Any, **kw: Any) -> Any:
        results = original(outputs, inputs, *args, **kw)
        if kw.get("create_graph", args[2] if len(args) > 2 else False):
            taken.note(outputs, results)
        return results

    torch.autograd.grad = grad
    try:
        yield taken
    finally:
        torch.autograd.grad = original


def reads_derivative(nodes: Iterable[Any], held: frozenset[int] = frozenset()) -> bool:
    """A graph, by its nodes, holds a derivative taken with create_graph: a node named as a
    backward formula's own, or one of the nodes autograd.grad returned (`held`)."""
    return any(SECOND_ORDER in type(n).__name__ or id(n) in held for n in nodes)


def _tensors(value: Any) -> list[torch.Tensor]:
    many = (value,) if isinstance(value, torch.Tensor) else value
    if not isinstance(many, (tuple, list)):
        return []
    return [t for t in many if isinstance(t, torch.Tensor)]


def _made_by_weights(tensor: torch.Tensor) -> bool:
    """A tensor the model's parameters computed (a posterior's parameters, a hidden state),
    not data made to require grad and moved by hand (a simulation's positions)."""
    walk = NodeWalk([tensor.grad_fn], limit=LATENT_WALK)
    return any(isinstance(getattr(n, "variable", None), torch.nn.Parameter) for n in walk)


def _additive_leaves(roots: list[Any]) -> list[torch.Tensor]:
    """The leaves reached from `roots` through additive nodes only."""

    def below(node: Any) -> list[Any]:
        return [n for n in inputs(node) if type(n).__name__ in ADDITIVE]

    found = []
    additive = [r for r in roots if type(r).__name__ in ADDITIVE]
    for node in NodeWalk(additive, below, limit=WALKED):
        leaf = getattr(node, "variable", None)
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
    return found


_SUMS = frozenset({"AddBackward0", "SubBackward0", "MulBackward0", "DivBackward0"})
_SCALED = frozenset({"MulBackward0", "DivBackward0"})


def _adds_constant(root: Any) -> bool:
    """The loss, through its top sums and scalings, adds a tensor that requires no grad (an
    edge without a node under a sum: a term computed outside the graph)."""
    for node in NodeWalk([root], lambda n: [m for m in inputs(n) if type(m).__name__ in _SUMS]):
        name = type(node).__name__
        edges = getattr(node, "next_functions", ())
        if name in _SUMS and name not in _SCALED and any(n is None for n, _ in edges):
            return True
    return False
