"""A backward that failed on a graph an earlier step built: a tensor carried from batch to
batch with its graph (an RNN's hidden state not detached between truncated-BPTT batches)
makes every loss reach back into the previous batch's graph, whose buffers the previous
backward freed ("backward through the graph a second time") or, kept by retain_graph=True,
whose weights the step has since updated in place ("modified by an inplace operation").

Autograd numbers its nodes as it creates them (`_sequence_nr`, per thread; a leaf's
AccumulateGrad has none of its own), so a node numbered at or below the last loss before
this step's first backward was built before this step: read only when a backward failed
with one of those errors, never on a healthy run. Only a node the previous step built
counts: a graph built once before the loop that steps reuse without failing (a view of a
weight) holds nothing freed or changed, and a later failure is another one's.

Where another optimizer took the previous step and the failing loss's own nodes reach
none of its tensors, the earlier graph is not the previous batch's: it is the part that
optimizer trains, its output handed on with its graph within the batch (a block of
layer-wise or forward-forward training fed to the next without `.detach()`). So too where
it reaches weights of an optimizer that did not step in between: the loss of a later part
of the same batch read the stepped part's output with its graph (an actor's imagined
rollout started from a world model's states), also when it scores that rollout with the
stepped part's heads.

Where the older part reaches weights an optimizer holds and none of them stepped since, it
was built for this loss and another optimizer's backward went through it first (a GAN's
discriminator loss on the generator's output not detached). A leaf that is no Parameter
and no optimizer holds does not make that reading: an older part reaching only such leaves
(an EBM's replay buffer of SGLD samples, each chain started from a leaf that requires grad,
written back without `.detach()`) is a tensor carried from batch to batch.

Where a buffer of a watched model holds a node of the older part, the carrier is that
buffer: written from a tensor with a graph while grad mode was on (a KAN layer's grid
re-fitted in the forward, a running statistic updated by hand without `torch.no_grad()`),
it hands its graph to every later step that reads it.

Where the older part reaches weights the steps since updated and this loss's own nodes reach
none of them, the carried tensor was made from those weights (a hypernetwork's generated
weights computed once before the loop): they reach the loss only through it, so a
`.detach()` would leave them no gradient; it must be made again in each step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.steps.records import CarriedGraph
from gradscope.watcher.module_states import carrying_states

ERRORS = {
    "backward through the graph a second time": "freed",
    "modified by an inplace operation": "modified",
}
"""autograd's message → what happened to the earlier graph."""
MAX_NODES = 200_000
"""Nodes walked at most, once, after the failure."""
_NO_NUMBER = 2**64 - 1
"""The sequence number of an AccumulateGrad node (none of its own)."""


@dataclass
class GraphMarks:
    last_root: int = -1
    """The sequence number of the last loss a backward completed on."""
    before_window: int = -1
    """`last_root` when the current step's first backward began (-1: the first step)."""
    before_previous: int = -1
    """`before_window` of the previous step."""
    stepper: int = -1
    """The index of the optimizer that took the last step (-1: none yet)."""
    stepping: list[Any] = field(default_factory=list)
    """Every optimizer that stepped in the current step (their tensors read only when a
    backward fails: no per-step walk of the param groups)."""
    last_stepped: list[Any] = field(default_factory=list)
    """`stepping` of the previous step: the optimizers whose steps since an older graph was
    built could update its weights."""
    found: CarriedGraph | None = None
    growing: tuple[int, tuple[str, ...]] | None = None
    """(step, buffers): the first read step at which watched models' buffers held a graph
    spanning the last two steps (`look_for_growth`)."""


def stepped(marks: GraphMarks, optimizer: Any) -> None:
    """An optimizer stepped: the weights a graph built before it was for."""
    if all(o is not optimizer for o in marks.stepping):
        marks.stepping.append(optimizer)


def note_roots(marks: GraphMarks, roots: list[torch.Tensor]) -> None:
    """A backward completed on `roots`: the newest node numbered so far."""
    for t in roots:
        node = t.grad_fn
        if node is not None:
            marks.last_root = max(marks.last_root, node._sequence_nr())


def window_began(marks: GraphMarks) -> None:
    """The first backward of a step begins: nodes up to the last loss are older."""
    marks.before_previous, marks.before_window = marks.before_window, marks.last_root
    marks.last_stepped, marks.stepping = marks.stepping, []


def look_for_growth(
    marks: GraphMarks, models: Sequence[torch.nn.Module], step: int, roots: list[torch.Tensor]
) -> None:
    """At the first backward of `step`: the buffers whose graph holds nodes the previous
    step built and nodes older still. Written each step from a tensor with a graph while
    grad mode was on and from their own last value (SNGP's precision matrix accumulated
    without torch.no_grad()), they chain every step's graph to the one before: the
    activations of every step stay alive until the buffer is reset, and no backward need
    ever fail. A buffer re-made from this step's forward alone, or holding one graph built
    once before the loop, spans no two steps; one the loss `roots` reads after its write is
    state the loss backpropagates through on purpose (retain_graph=True), GS459's kind when
    it fails. A buffer without a graph costs one check; the loss's graph is walked only
    where a buffer spans steps."""
    if marks.growing is not None or marks.before_previous < 0:
        return
    several = len(models) > 1
    spanning = [
        (f"{type(model).__name__}.{name}" if several else name, buffer.grad_fn)
        for model in models
        for name, buffer in model.named_buffers()
        if buffer.grad_fn is not None
        and _spans(buffer.grad_fn, marks.before_previous, marks.before_window)
    ]
    if not spanning:
        return
    read = _node_ids(roots)
    unread = tuple(n for n, node in spanning if id(node) not in read)
    if unread:
        marks.growing = (step, unread)


def _node_ids(roots: list[torch.Tensor]) -> set[int]:
    """The ids of the nodes of the roots' graph (at most MAX_NODES)."""
    seen: set[int] = set()
    stack = [t.grad_fn for t in roots]
    while stack and len(seen) < MAX_NODES:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(n for n, _ in node.next_functions)
    return seen


def _spans(node: Any, older: int, previous: int) -> bool:
    """Whether the graph below `node` holds a node numbered in (`older`, `previous`] (the
    previous step's) and one numbered at or below `older` (an earlier step's)."""
    seen: set[int] = set()
    stack, between, below = [node], False, False
    while stack and len(seen) < MAX_NODES and not (between and below):
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        number = node._sequence_nr()
        below = below or number <= older
        between = between or older < number <= previous
        stack.extend(n for n, _ in node.next_functions)
    return between and below


def failed(
    marks: GraphMarks,
    roots: list[torch.Tensor],
    exc: BaseException,
    step: int,
    stepper_params: set[int],
    held: set[int],
    names: dict[int, str] | None = None,
    models: Sequence[torch.nn.Module] = (),
) -> None:
    """The backward raised `exc`: for autograd's two errors of a graph used again, find
    a node of the failing graph built before this step, and keep the first such failure.
    `stepper_params`: the ids of the tensors of the optimizer that took the last step;
    `held`: those of every optimizer's tensors; `names`: the tracked tensors' names by id;
    `models`: the watched models, whose buffers may carry the older graph."""
    what = next((v for k, v in ERRORS.items() if k in str(exc)), None)
    if what is None or marks.found is not None or marks.before_window < 0:
        return
    old, own_leaves, weights, nodes = _older_node(roots, marks.before_window)
    if old is not None and old[0] > marks.before_previous:
        updated = {id(p) for o in marks.last_stepped for g in o.param_groups for p in g["params"]}
        reads_stepper = not stepper_params.isdisjoint(own_leaves)
        handed = bool(own_leaves) and (
            not reads_stepper or _trains_another_part(updated, own_leaves, held)
        )
        shared = _trained(weights, held) and updated.isdisjoint(weights)
        marks.found = CarriedGraph(
            step,
            old[1],
            what,
            marks.stepper if handed else None,
            shared and not handed,
            handed and reads_stepper,
            _made_from(set(weights), own_leaves, updated, names or {}) if not handed else (),
            _carrying_buffers(models, nodes, marks.before_window),
            carrying_states(models, marks.before_window, _reaches_older),
        )


def _carrying_buffers(
    models: Sequence[torch.nn.Module], nodes: set[int], mark: int
) -> tuple[str, ...]:
    """The names of the models' buffers whose grad_fn is in the failing graph and reaches
    a node numbered at or below `mark` (the buffer, written again this step, still holds
    the graph of an earlier write), the class name prefixed where there are several
    models."""
    several = len(models) > 1
    return tuple(
        f"{type(model).__name__}.{name}" if several else name
        for model in models
        for name, buffer in model.named_buffers()
        if buffer.grad_fn is not None
        and id(buffer.grad_fn) in nodes
        and _reaches_older(buffer.grad_fn, mark)
    )


def _reaches_older(node: Any, mark: int) -> bool:
    """Whether the graph below `node` holds a node numbered at or below `mark`."""
    seen: set[int] = set()
    stack = [node]
    while stack and len(seen) < MAX_NODES:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node._sequence_nr() <= mark:
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


def _made_from(
    weights: set[int], own_leaves: dict[int, Any], updated: set[int], names: dict[int, str]
) -> tuple[str, ...]:
    """The names of the weights the older part reaches, where the steps since updated all
    of them and this loss's own nodes reach none: the carried tensor is made from them and
    is their only way to the loss (weights a hypernetwork generated once); else ()."""
    if not weights or not weights <= updated or not weights.isdisjoint(own_leaves):
        return ()
    named = tuple(name for k, name in names.items() if k in weights)
    return named or (f"{len(weights)} tensor(s) no watched model names",)


def _trained(weights: dict[int, Any], held: set[int]) -> bool:
    """Whether the older part reaches a tensor that trains: one an optimizer holds, or a
    Parameter (an optimizer not seen stepping yet holds it, a GAN's generator's); a leaf
    that is neither (a chain of samples started from a leaf that requires grad) is not."""
    return any(k in held or isinstance(v, torch.nn.Parameter) for k, v in weights.items())


def _trains_another_part(updated: set[int], own_leaves: dict[int, Any], held: set[int]) -> bool:
    """This loss reaches weights outside `updated` (those stepped since the older graph
    was built: an optimizer's, or parameters of an optimizer not seen stepping yet): a
    later part of the same batch (an actor's loss on a world model's states), not the
    next batch of the same loop, whose weights all stepped in between (one optimizer or
    several stepped after one backward)."""
    return any(
        k not in updated and (k in held or isinstance(v, torch.nn.Parameter))
        for k, v in own_leaves.items()
    )


def _older_node(
    roots: list[torch.Tensor], mark: int
) -> tuple[tuple[int, str] | None, dict[int, torch.Tensor], dict[int, Any], set[int]]:
    """The number and name of the newest node of the roots' graph numbered at or below
    `mark` (the one where the earlier graph joins this one), None if there is none; the
    leaves the graph's newer nodes reach (this step's own tensors) by id; the leaves
    its older part reaches, by id; and the ids of every node walked."""
    seen: set[tuple[int, bool]] = set()
    stack: list[Any] = [(t.grad_fn, False) for t in roots if t.grad_fn is not None]
    best: tuple[int, str] | None = None
    leaves: dict[int, torch.Tensor] = {}
    weights: dict[int, Any] = {}
    while stack and len(seen) < MAX_NODES:
        node, older = stack.pop()
        if node is None or (id(node), older) in seen:
            continue
        seen.add((id(node), older))
        number = node._sequence_nr()
        if number <= mark and (best is None or number > best[0]):
            best = (number, node.name())
        older = older or number <= mark
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            if older:
                weights[id(variable)] = variable
            else:
                leaves[id(variable)] = variable
        stack.extend((n, older) for n, _ in node.next_functions)
    return best, leaves, weights, {k for k, _ in seen}
