"""One instrumented forward+backward pass → RunStats.

Gradients are computed the way training computes them, with `backward()`
(so every activation-checkpointing mode works, reentrant included): the
user's `.grad` tensors are set aside first and put back, the very same
objects, afterwards. One global forward hook records which modules ran and in
what order; the activation memory is read off the graph afterwards (no
saved-tensor hooks in the user's forward or backward).

Cost is the budget (benchmarks/bench_inspect.py: <= 1.05x the bare step at
124M parameters): the statistics are one fused L2 norm over weights and
gradients together plus, for small tensors and row-lookup tables only,
aminmax and a zero count, read back with a single host sync (see
`fused_stats`). Model state is restored exactly (`gradscope.inspector.preserve`).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch

from gradscope import taken_derivatives
from gradscope.autograd_walk import NodeWalk
from gradscope.errors import UserCodeError
from gradscope.inspector import flat_off, hooks, norm_feeds, picked_choice, random_skip, zero_gates
from gradscope.inspector.fused_stats import FusedNumbers, GradNumbers, fused_stats, owners, plans
from gradscope.inspector.graph_memory import retained_graphs, saved_bytes
from gradscope.inspector.hooks import backward_target, call_model, pick_loss
from gradscope.inspector.preserve import paused_guard, preserved_state
from gradscope.stats import FedProbabilities, ModuleStats, ParamStats, RunStats
from gradscope.taken_derivatives import TakenDerivatives, reads_derivative
from gradscope.watcher import kl_inputs, loss_inputs, renormalised, soft_target_values

__all__ = [
    "backward_grads",
    "backward_target",
    "call_model",
    "measure",
    "module_order",
    "pick_loss",
    "run",
]


@contextmanager
def module_order(model: torch.nn.Module) -> Iterator[dict[str, int]]:
    """Record the order in which modules are first entered, then remove the hook.

    One global pre-hook looked up by module identity, not one hook per module: registering
    and removing hundreds of hooks costs more than the lookups."""
    order: dict[str, int] = {}
    names = {id(m): name for name, m in model.named_modules()}

    def enter(m: torch.nn.Module) -> None:
        name = names.get(id(m))
        if name is not None and name not in order:
            order[name] = len(order)

    with hooks.global_module_hooks(enter):
        yield order


# --- the pass --------------------------------------------------------------------------------


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the pass, back to its prior state after.

    The pass allocates a few thousand short-lived containers (hooks, the graph walk, the
    statistics), all freed by reference counting; left on, the collector would run on
    them, and every ~20th pass a full collection of the whole heap (torch's ~170k objects:
    ~0.1 s on a slow CPU) would land inside it. Cyclic garbage made meanwhile (by the
    user's forward, say) is collected as usual once the pass is over.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    grad_outputs: torch.Tensor | None = None,
) -> RunStats:
    """Forward, backward and statistics, with the model left as it was found."""
    with (
        gc_paused(),
        preserved_state(model),
        module_order(model) as order,
        torch.enable_grad(),
        hooks.loss_scales() as scales,
    ):
        start = time.perf_counter()
        with taken_derivatives.recorded() as taken:
            with norm_feeds.watching() as feeds:
                output = hooks.forward(model, batch)
            target, source = backward_target(output, loss_fn, grad_outputs)
        scale = scales.get(target)
        stats = measure(model, target, grad_outputs, source, order, start, scale, taken)
        return replace(stats, norm_fed=feeds.names(model))


def measure(
    model: torch.nn.Module,
    target: torch.Tensor,
    grad_outputs: torch.Tensor | None,
    source: str,
    order: dict[str, int],
    start: float,
    scale: hooks.LossScale | None = None,
    derivatives: TakenDerivatives | None = None,
) -> RunStats:
    """Backward from `target` (already computed by a forward) and the fused statistics.

    `scale`: `target` is a GradScaler-scaled loss; loss and gradients are
    reported divided by it. `derivatives`: those the forward and loss took with create_graph.
    """
    named = list(model.named_parameters())
    modules = list(model.named_modules())  # walked once here: each walk costs a few µs a module
    with paused_guard():
        nodes = hooks.graph_nodes(target)
        saved = saved_bytes(nodes, [p for _, p in named])
        taken = derivatives or TakenDerivatives()
        facts = _graph_facts(model, target, nodes, order, taken.held())  # before the backward
    named, grads = _gradients(model, target, grad_outputs, named, nodes)
    with paused_guard():  # from here on, only gradscope's own tensor code runs
        loss = scale.loss if scale is not None else target
        owned = owners(modules)
        trainable = [p for _, p in named if p.requires_grad]
        with torch.no_grad():
            numbers = fused_stats(loss, [p for _, p in named], grads, plans(owned, trainable))
        duration = time.perf_counter() - start
        lookups = {i for i, kinds in owned.items() if any(kinds)}
        factor = 1.0 / scale.value if scale is not None else 1.0
        weighted = grad_outputs is not None
        return RunStats(
            params=_param_stats(named, grads, numbers, order, lookups, factor, taken),
            modules=_module_stats(modules, order),
            loss_value=None if weighted else numbers.loss,
            loss_finite=numbers.loss_finite,
            loss_requires_grad=target.requires_grad,
            loss_source=source if scale is None else _unscaled(source, scale.value),
            duration_s=duration,
            model_class=type(model).__name__,
            device=str(target.device),
            saved_bytes=saved,
            retained=retained_graphs(modules, [p for _, p in named]),
            loss_scale=None if scale is None else scale.value,
            loss_terms=None if weighted else summed_terms(loss),
            **facts,
        )


def _module_stats(
    modules: Sequence[tuple[str, torch.nn.Module]], order: dict[str, int]
) -> tuple[ModuleStats, ...]:
    return tuple(
        ModuleStats(name, type(m).__name__, name in order, order.get(name)) for name, m in modules
    )


def _graph_facts(
    model: torch.nn.Module,
    loss: torch.Tensor,
    nodes: Iterable[Any],
    order: dict[str, int],
    derivatives: frozenset[int],
) -> dict[str, Any]:
    """What the loss's graph and the forward show of its meaning: a loss fed probabilities, a
    loss on a derivative taken with create_graph (rules/derivative_bias.py), branches behind a
    zero gate (zero_gates.py), layers skipped at random (random_skip.py), a supernet's
    candidates left out of this step's path (picked_choice.py), parameters behind a
    zero-derivative op (flat_off.py)."""
    return {
        "skipped_at_random": random_skip.names(model, order),
        "picked_choices": picked_choice.names(model, order),
        "fed_probabilities": fed_probabilities(loss),
        "loss_through_derivative": reads_derivative(nodes, derivatives),
        "flat_off": flat_off.behind(model, loss, nodes),
        **vars(zero_gates.read(model, loss)),
    }


def fed_probabilities(loss: torch.Tensor) -> tuple[FedProbabilities, ...]:
    """The losses near the top of the graph that want logits and got probabilities."""
    found = loss_inputs.find(loss.grad_fn) if loss.grad_fn is not None else []
    again = renormalised.find(loss.grad_fn) or kl_inputs.find(loss.grad_fn)
    again = again or soft_target_values.find(loss.grad_fn)
    found += [again] if again is not None else []
    return tuple(FedProbabilities(m.what, m.detail, m.floor) for m in found)


def _unscaled(source: str, scale: float) -> str:
    return (
        f"{source}, unscaled: a GradScaler loss scale of {scale:g} was "
        "removed from the loss and every gradient"
    )


def _gradients(
    model: torch.nn.Module,
    target: torch.Tensor,
    grad_outputs: torch.Tensor | None,
    named: list[tuple[str, torch.nn.Parameter]],
    nodes: Iterable[Any],
) -> tuple[list[tuple[str, torch.nn.Parameter]], list[torch.Tensor | None]]:
    """The parameters as registered after the backward, and the trainable ones' gradients
    (all None where the target needs no backward)."""
    trainable = [p for _, p in named if p.requires_grad]
    if not (target.requires_grad and trainable):
        return named, [None] * len(trainable)
    grads = backward_grads(target, grad_outputs, trainable, nodes)
    return _registered_after(model, trainable, grads)


_SUM = 2
"""`reduction='sum'` as a loss node saves it (torch's Reduction enum: none 0, mean 1, sum 2)."""


def summed_terms(loss: torch.Tensor, limit: int = 64) -> int | None:
    """How many terms a loss reduced by sum adds up (None: a mean, or not known).

    Read off the top of its graph: through scalar arithmetic (`bce + kld`, `2 * loss`) to the
    nodes that reduce a tensor to a number. Each must be a sum (`.sum()`, a loss with
    reduction='sum'); the count is the fewest terms any of them adds (a mean reduction of the
    same loss would divide its gradients by that many at least). A handful of nodes: no
    noticeable cost."""
    if loss.numel() != 1 or loss.grad_fn is None:
        return None
    try:
        return _summed_terms(loss.grad_fn, limit)
    except (AttributeError, IndexError, RuntimeError):  # node metadata this torch lacks
        return None


def _summed_terms(root: Any, limit: int) -> int | None:
    counts: list[int] = []
    nodes = NodeWalk([root], _scalar_inputs, limit=limit + 1)
    for node in nodes:
        if nodes.visited > limit:
            return None
        inputs = [(n, i) for n, i in node.next_functions if n is not None]
        sizes = [math.prod(n._input_metadata[i].shape) for n, i in inputs]
        if all(size == 1 for size in sizes):
            continue  # scalar arithmetic: the walk goes on below
        name = type(node).__name__
        if not (name.startswith("SumBackward") or getattr(node, "_saved_reduction", None) == _SUM):
            return None
        terms = max(sizes)
        if name.startswith("NllLoss"):  # (N, C) log-probabilities: one term per target
            shape = next(n._input_metadata[i].shape for n, i in inputs)
            terms = terms // shape[1] if len(shape) > 1 else 1
        counts.append(terms)
    return min(counts) if counts and min(counts) > 1 else None


def _scalar_inputs(node: Any) -> list[Any]:
    """A node's inputs where every one is a single number (scalar arithmetic), else none."""
    inputs = [(n, i) for n, i in node.next_functions if n is not None]
    if all(math.prod(n._input_metadata[i].shape) == 1 for n, i in inputs):
        return [n for n, _ in inputs]
    return []


def _registered_after(
    model: torch.nn.Module, trainable: Sequence[torch.Tensor], grads: list[torch.Tensor | None]
) -> tuple[list[tuple[str, torch.nn.Parameter]], list[torch.Tensor | None]]:
    """The parameters as registered after the backward, and their gradients.

    FSDP2 (`fully_shard`) registers unsharded parameters for the forward and the sharded
    ones again during the backward, with the gradients on those; the unsharded ones'
    storage is freed by then (reading it would crash). A parameter still registered has its
    gradient in `grads` (its `.grad` is the user's again)."""
    ours = {id(p): g for p, g in zip(trainable, grads, strict=True)}
    named = list(model.named_parameters())
    return named, [ours.get(id(p), p.grad) for _, p in named if p.requires_grad]


def backward_grads(
    target: torch.Tensor,
    grad_outputs: torch.Tensor | None,
    params: Sequence[torch.Tensor],
    nodes: Iterable[Any],
) -> list[torch.Tensor | None]:
    """`target.backward()` as training runs it, with every leaf's `.grad` set aside and restored.

    `backward()` rather than `autograd.grad(target, params)`: a reentrant
    checkpoint refuses `.grad()`. The leaves it accumulates into are the
    parameters plus any leaf of the loss's graph (an input that requires grad);
    their `.grad` tensors are put back, the same objects, untouched.
    """
    with paused_guard():  # `.grad` reads and writes are torch calls too: ~2 µs each guarded
        leaves = {id(p): p for p in params}
        for node in nodes:
            variable = getattr(node, "variable", None)
            if isinstance(variable, torch.Tensor):
                leaves.setdefault(id(variable), variable)
        aside = [(t, t.grad) for t in leaves.values()]
        for t, _ in aside:
            t.grad = None
    try:
        target.backward(grad_outputs)
    except Exception as exc:
        raise UserCodeError("backward pass", exc) from exc
    finally:
        with paused_guard():
            grads = [p.grad for p in params]
            for t, grad in aside:
                t.grad = grad
    return grads


def _param_stats(
    named: Sequence[tuple[str, torch.Tensor]],
    grads: list[torch.Tensor | None],
    numbers: FusedNumbers,
    order: dict[str, int],
    lookups: Set[int],
    factor: float,
    taken: TakenDerivatives,
) -> tuple[ParamStats, ...]:
    """Each parameter's statistics; `factor` unscales the gradients' (a GradScaler's loss);
    `taken`: the derivatives taken with create_graph, and what only adds to their outputs."""
    gradient = iter(grads)
    measured = iter(numbers.grads)
    out = []
    for (name, p), weight_norm in zip(named, numbers.weight_norms, strict=False):
        module = name.rpartition(".")[0]
        g = next(gradient) if p.requires_grad else None
        plain = _param(name, module, p, weight_norm or 0.0, order.get(module), id(p) in lookups)
        if taken.offset(p):
            plain = replace(plain, derivative_offset=True)
        out.append(plain if g is None else _with_grad(plain, p, next(measured), factor))
    return tuple(out)


def _with_grad(plain: ParamStats, p: torch.Tensor, g: GradNumbers, factor: float) -> ParamStats:
    """A parameter's statistics with its gradient's. Where min and max were not measured the
    norm stands in (finite, non-zero: see fused_stats.plans)."""
    lo, hi = g.low, g.high
    if lo is None or hi is None:
        biggest, finite = None, math.isfinite(g.l2 or 0.0)
    else:
        both = lo + hi
        biggest = max(abs(lo), abs(hi)) if not math.isnan(both) else math.nan
        finite = math.isfinite(lo) and math.isfinite(hi)
    zeros = None if g.nonzeros is None else 1.0 - g.nonzeros / max(p.numel(), 1)
    if zeros is None and lo == 0 and hi == 0:
        zeros = 1.0  # all-zero, by its extremes
    return replace(
        plain,
        has_grad=True,
        grad_norm=(g.l2 or 0.0) * factor,
        grad_max=None if biggest is None else biggest * factor,
        zero_fraction=zeros,
        finite=finite,
    )


def _param(
    name: str,
    module: str,
    p: torch.Tensor,
    weight_norm: float,
    depth: int | None,
    lookup: bool = False,
) -> ParamStats:
    return ParamStats(
        name=name,
        module=module,
        shape=tuple(p.shape),
        dtype=str(p.dtype).removeprefix("torch."),
        requires_grad=p.requires_grad,
        has_grad=False,
        weight_norm=weight_norm,
        depth=depth,
        lookup=lookup,
    )
