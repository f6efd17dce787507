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
`_fused_stats`). Model state is restored exactly (`gradscope.inspector.preserve`).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from gradscope.distributed import context, norms
from gradscope.distributed.norms import local
from gradscope.errors import UserCodeError
from gradscope.inspector import hooks
from gradscope.inspector.hooks import backward_target, call_model, pick_loss
from gradscope.inspector.preserve import paused_guard, preserved_state, storage_of
from gradscope.stats import ModuleStats, ParamStats, RunStats

__all__ = [
    "backward_grads",
    "backward_target",
    "call_model",
    "measure",
    "module_order",
    "pick_loss",
    "retained_graphs",
    "run",
    "saved_bytes",
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
        output = hooks.forward(model, batch)
        target, source = backward_target(output, loss_fn, grad_outputs)
        return measure(model, target, grad_outputs, source, order, start, scales.get(target))


def measure(
    model: torch.nn.Module,
    target: torch.Tensor,
    grad_outputs: torch.Tensor | None,
    source: str,
    order: dict[str, int],
    start: float,
    scale: hooks.LossScale | None = None,
) -> RunStats:
    """Backward from `target` (already computed by a forward) and the fused statistics.

    `scale`: `target` is a GradScaler-scaled loss; loss and gradients are
    reported divided by it.
    """
    named = list(model.named_parameters())
    modules = list(model.named_modules())  # walked once here: each walk costs a few µs a module
    trainable = [p for _, p in named if p.requires_grad]
    grads: list[torch.Tensor | None] = [None] * len(trainable)
    with paused_guard():
        nodes = hooks.graph_nodes(target)
        saved = saved_bytes(nodes, [p for _, p in named])
    if target.requires_grad and trainable:
        grads = backward_grads(target, grad_outputs, trainable, nodes)
        named, grads = _registered_after(model, trainable, grads)
        trainable = [p for _, p in named if p.requires_grad]
    with paused_guard():  # from here on, only gradscope's own tensor code runs
        loss = scale.loss if scale is not None else target
        factor = 1.0 / scale.value if scale is not None else 1.0
        owners = _owners(modules)
        with torch.no_grad():
            numbers = _fused_stats(loss, [p for _, p in named], grads, _measured(owners, trainable))
        duration = time.perf_counter() - start
        stats = _assemble(
            model,
            modules,
            named,
            grads,
            numbers,
            order,
            target,
            source,
            duration,
            grad_outputs is not None,
            factor,
            {i for i, kinds in owners.items() if any(kinds)},
        )
        if scale is not None:
            stats = replace(
                stats,
                loss_source=f"{source}, unscaled: a GradScaler loss scale of {scale.value:g} was "
                "removed from the loss and every gradient",
                loss_scale=scale.value,
            )
        return replace(
            stats,
            saved_bytes=saved,
            retained=retained_graphs(modules),
            loss_terms=None if grad_outputs is not None else summed_terms(loss),
        )


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
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if len(seen) > limit:
            return None
        inputs = [(n, i) for n, i in node.next_functions if n is not None]
        sizes = [math.prod(n._input_metadata[i].shape) for n, i in inputs]
        if all(size == 1 for size in sizes):
            stack.extend(n for n, _ in inputs)
            continue
        name = type(node).__name__
        if not (name.startswith("SumBackward") or getattr(node, "_saved_reduction", None) == _SUM):
            return None
        terms = max(sizes)
        if name.startswith("NllLoss"):  # (N, C) log-probabilities: one term per target
            shape = next(n._input_metadata[i].shape for n, i in inputs)
            terms = terms // shape[1] if len(shape) > 1 else 1
        counts.append(terms)
    return min(counts) if counts and min(counts) > 1 else None


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


_SAVED_SLOTS: dict[type, tuple[str, ...]] = {}
"""Backward node class → its attributes that hold saved tensors (found with dir() once)."""


def saved_bytes(nodes: Iterable[Any], params: Sequence[torch.Tensor]) -> int:
    """Bytes of activations the loss's graph holds for backward, each storage once.

    Read off the graph after the forward, not with saved-tensor hooks during it: those
    cost a Python call per saved tensor in the forward and again in the backward
    (~0.6 ms for a small CNN's 150). Parameters saved for backward are not activations.
    """
    weights = {storage_of(p) for p in params}
    sizes: dict[tuple[int, int], int] = {}
    for node in nodes:
        for t in _saved_tensors(node):
            where = storage_of(t)
            if where is not None and where not in weights:
                sizes[(where, int(t.storage_offset()))] = t.nbytes
    return sum(sizes.values())


def _saved_tensors(node: Any) -> Iterator[torch.Tensor]:
    """What a backward node saved, read without unpacking it: unpacking runs a saved tensor's
    hooks (non-reentrant checkpointing would recompute its region). A tensor with hooks of
    its own is left out (checkpointing recomputes it, save_on_cpu moved it), and so is a
    parameter saved through a view (torch keeps no readable data for it)."""
    slots = _SAVED_SLOTS.get(type(node))
    if slots is None:
        slots = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
        _SAVED_SLOTS[type(node)] = slots
    for slot in slots:
        try:
            raw = getattr(node, slot)
        except RuntimeError:  # freed by an earlier backward
            continue
        for saved in raw if isinstance(raw, (list, tuple)) else (raw,):
            if saved is not None and saved.unpack_hook is None:
                data = saved.data
                if isinstance(data, torch.Tensor):
                    yield data


def retained_graphs(modules: Iterable[tuple[str, torch.nn.Module]]) -> tuple[str, ...]:
    """Module attributes that still hold a tensor with a grad_fn after the pass.

    Such a reference keeps the whole autograd graph of the step alive (the
    classic slow out-of-memory: `self.last = out`, `self.losses.append(loss)`).
    """
    return tuple(
        f"{name}.{attr}" if name else attr
        for name, module in modules
        for attr, value in vars(module).items()
        if isinstance(value, _HOLDERS) and attr[0] != "_" and _holds_graph(value)
    )


_HOLDERS = (torch.Tensor, list, tuple, dict)
"""What an attribute must be to hold a graph (most are flags and sizes: one type test)."""


def _holds_graph(value: Any) -> bool:
    """A tensor with a grad_fn, directly or in a list, tuple or dict."""
    if isinstance(value, torch.Tensor):
        return value.grad_fn is not None
    return any(
        isinstance(v, torch.Tensor) and v.grad_fn is not None
        for v in (value.values() if isinstance(value, dict) else value)
    )


# --- the statistics ------------------------------------------------------------------------------


def _dense(g: torch.Tensor) -> torch.Tensor:
    """What the statistics read: the values of a sparse gradient, |g| of a complex one."""
    if g.is_sparse:
        g = g.coalesce().values()
    if g.is_complex():
        g = g.abs()
    return g if g.numel() else g.new_zeros(1)


EXACT_MAX = 1 << 20
"""Gradients up to this many elements also get max|g| (a fused pass that costs nothing at this
size); larger ones only where a rule needs it: see `_measured`."""


def _owners(modules: Iterable[tuple[str, torch.nn.Module]]) -> dict[int, list[bool]]:
    """id(parameter) → for each module that owns it, whether that module is a lookup table."""
    lookup = (torch.nn.Embedding, torch.nn.EmbeddingBag)
    owners: dict[int, list[bool]] = {}
    for _, m in modules:
        for p in m._parameters.values():
            if p is not None:
                owners.setdefault(id(p), []).append(isinstance(m, lookup))
    return owners


@dataclass(frozen=True)
class _Plan:
    """What `_fused_stats` measures per gradient besides its L2 norm."""

    extremes: bool
    """max|g| (min and max)."""
    zeros: bool
    """The number of exactly-zero elements."""


def _measured(owners: dict[int, list[bool]], params: Sequence[torch.Tensor]) -> list[_Plan]:
    """Which gradients get max|g| and a zero count besides their L2 norm.

    Each is one more full pass over the gradient: at 124M parameters a pass costs about 2%
    of the bare step, so they are made where they are cheap or needed. max|g|: tensors up to
    EXACT_MAX elements (fused). Zero counts (by rows): only lookup tables (untied)
    and sparse gradients, for the RMS over non-zero rows that lets a table, whose
    unused rows get exact zeros, be compared with other tables; a table tied to a linear
    output head gets a gradient on every row. Elsewhere both stay unknown (None; the table
    shows "-") and the L2 norm stands in: NaN or Inf anywhere makes it non-finite, an
    all-zero gradient makes it zero, and either (rare) sends the tensor through the exact
    pass after all.
    """
    plans = []
    for p in params:
        kinds = owners.get(id(p), [False])
        table = p.is_sparse or all(kinds)
        plans.append(_Plan(p.numel() <= EXACT_MAX, table))
    return plans


def _exact(grads: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """[min, max, nonzeros] per gradient, as one float64 tensor of shape (3, n)."""
    f64 = torch.float64
    rows = [
        torch.stack([*torch.aminmax(g), g.count_nonzero()]).to(device=device, dtype=f64)
        for g in grads
    ]
    return torch.stack(rows).T if rows else torch.empty((3, 0), dtype=f64, device=device)


def _extremes(grads: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """[mins, maxes] as two float64 vectors. On a GPU two fused kernels (max, and max of the
    negated copies); on a CPU one aminmax per tensor reads each once and copies nothing
    (0.29 ms against 0.72 ms for 66 tensors of a small CNN)."""
    if all(g.device.type == "cpu" for g in grads):
        pairs = [torch.aminmax(g) for g in grads]
        return [_gather([p.min for p in pairs], device), _gather([p.max for p in pairs], device)]
    highs = torch._foreach_max(grads)
    lows = torch._foreach_max(torch._foreach_neg(grads))
    return [-_gather(lows, device), _gather(highs, device)]


def _in_nonzero_rows(table_grad: torch.Tensor) -> torch.Tensor:
    """Elements in the rows that got a gradient (a lookup table's unused rows are exactly
    zero; a used row is non-zero throughout). One norm per row reads the tensor once at
    the speed of an L2 norm; count_nonzero is ~4x slower on a CPU (5.3 against 1.5 ms
    for BERT's 7.8M-element word table)."""
    rows = table_grad.reshape(table_grad.shape[0] if table_grad.dim() else 1, -1)
    low = rows.dtype in (torch.float16, torch.bfloat16)
    norms = torch.linalg.vector_norm(rows, dim=1, dtype=torch.float32 if low else None)
    return norms.count_nonzero() * rows.shape[1]


_NORMED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""Dtypes torch's norms take (with the complex ones); not float8, integers or bool."""


def _normable(t: torch.Tensor) -> bool:
    return t.dtype in _NORMED or t.is_complex()


def _stored_norm(t: torch.Tensor) -> torch.Tensor:
    """L2 norm of the stored values of a tensor torch's norms refuse (an int8 or float8
    quantized weight, its scale not applied), read in slices so that no float64 copy of a
    large tensor is made at once."""
    flat = t.reshape(-1)
    step = 1 << 22
    if flat.numel() <= step:
        return torch.linalg.vector_norm(flat.double())
    parts = [
        torch.linalg.vector_norm(flat[i : i + step].double()) for i in range(0, len(flat), step)
    ]
    return torch.linalg.vector_norm(torch.stack(parts))


def _gather(scalars: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """0-d tensors → one float64 vector on `device`: one op where they share device and dtype."""
    if all(t.device == device and t.dtype == scalars[0].dtype for t in scalars):
        return torch.stack(list(scalars)).to(torch.float64)
    return torch.stack([t.to(device=device, dtype=torch.float64) for t in scalars])


def _fused_stats(
    loss: torch.Tensor,
    params: list[torch.Tensor],
    grads: list[torch.Tensor | None],
    plans: Sequence[_Plan],
) -> list[float | None]:
    """[loss, loss_finite, weight norms..., per present grad: l2, min, max, nonzeros].

    One fused L2 over weights and gradients together (half precision accumulated in float32,
    so it cannot overflow); max and min over the small gradients (`_extremes`), the
    elements of non-zero rows where the plan names it. Min and max propagate NaN and Inf, so
    they are the exact non-finite test (an L2 norm can overflow without any Inf). Read back
    with one host sync; a second one only when a gradient without extremes has a zero or
    non-finite norm, to make that verdict exact, or when a norm underflowed. None: not
    measured. (torch's inf-norm would give max|g| in one call but is ~15x slower on a CPU.)
    """
    f64 = torch.float64
    device = loss.device
    given = [(g, plan) for g, plan in zip(grads, plans, strict=True) if g is not None]
    present = [(_dense(local(g)), plan) for g, plan in given]
    k = len(present)
    loss = loss.detach()
    parts = [
        loss.reshape(-1)[:1].real.to(f64)
        if loss.numel() == 1
        else torch.full((1,), math.nan, dtype=f64, device=device),
        torch.isfinite(loss).all().reshape(1).to(f64),
    ]
    weights_in = [_dense(local(p)) for p in params]
    counts = [i for i, t in enumerate(weights_in) if not _normable(t)]
    if counts:  # frozen int8/float8 storage (a quantized base): no gradient, its norm apart
        weights_in = [t for t in weights_in if _normable(t)]
    tensors = weights_in + [g for g, _ in present]  # under no_grad
    norms: list[torch.Tensor] = []
    if tensors:
        low = any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)
        norms = list(torch._foreach_norm(tensors, 2, dtype=torch.float32 if low else None))
    for i in counts:
        norms.insert(i, _stored_norm(local(params[i])))
    if norms:
        parts.append(_gather(norms, device))
    small = [i for i, (_, plan) in enumerate(present) if plan.extremes]
    counted = [i for i, (_, plan) in enumerate(present) if plan.zeros]
    if small:
        parts += _extremes([present[i][0] for i in small], device)
    if counted:
        nonzero = [_in_nonzero_rows(present[i][0]).to(device=device, dtype=f64) for i in counted]
        parts.append(torch.stack(nonzero))
    numbers: list[float | None] = list(torch.cat(parts).tolist())
    head = 2 + len(params)
    l2 = numbers[head : head + k]
    lo: list[float | None] = [None] * k
    hi: list[float | None] = [None] * k
    nz: list[float | None] = [None] * k
    rest = iter(numbers[head + k :])
    for target in (lo, hi):
        for i in small:
            target[i] = next(rest)
    for i in counted:
        nz[i] = next(rest)
    weights = numbers[2:head]
    shards = _Shards.of(params, [g for g, _ in given])  # FSDP2: each rank holds a part
    if shards:
        shards.weights([(weights, "l2")], range(len(params)))
        shards.grads([(l2, "l2"), (lo, "min"), (hi, "max"), (nz, "sum")], range(k))
    doubt = [i for i in range(k) if hi[i] is None and not 0 < (l2[i] or 0) < math.inf]
    if doubt:  # all-zero or non-finite by the norm: make it exact
        again = _exact([present[i][0] for i in doubt], device).tolist()
        for j, i in enumerate(doubt):
            lo[i], hi[i], nz[i] = again[0][j], again[1][j], again[2][j]
        if shards:
            shards.grads([(lo, "min"), (hi, "max"), (nz, "sum")], doubt)
    tiny = [i for i in range(k) if l2[i] == 0 and (hi[i] or lo[i])]
    if tiny:  # non-zero elements whose squares underflow float32 (|g| < 1e-19): float64 norm
        norms64 = [torch.linalg.vector_norm(present[i][0].double()) for i in tiny]
        for i, norm in zip(tiny, torch.stack(norms64).tolist(), strict=True):
            l2[i] = norm
        if shards:
            shards.grads([(l2, "l2")], tiny)
    return numbers[:2] + weights + l2 + lo + hi + nz


@dataclass
class _Shards:
    """Whole-tensor statistics from FSDP2 (`fully_shard`) shards: each rank measured its own
    part; L2 norms combine as the root of the summed squares, min and max as the min and
    max, zero counts as the sum. One all_gather per call, made by every rank in the same
    order (every decision before a call rests on values already combined). Replicated
    tensors, like everything outside torchrun, are left as this rank measured them."""

    rank: context.Rank
    weight_sharded: list[bool]
    grad_sharded: list[bool]

    @classmethod
    def of(cls, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> _Shards | None:
        weight_sharded = [norms.is_sharded(p) for p in params]
        grad_sharded = [norms.is_sharded(g) for g in grads]
        if not any(weight_sharded + grad_sharded):
            return None
        rank = context.current()
        return None if rank is None else cls(rank, weight_sharded, grad_sharded)

    def weights(self, columns: list[tuple[list[float | None], str]], at: Sequence[int]) -> None:
        self._combine(columns, at, self.weight_sharded)

    def grads(self, columns: list[tuple[list[float | None], str]], at: Sequence[int]) -> None:
        self._combine(columns, at, self.grad_sharded)

    def _combine(
        self, columns: list[tuple[list[float | None], str]], at: Sequence[int], sharded: list[bool]
    ) -> None:
        """Entries `at` of each column, combined over the ranks in place (None stays None: the
        same entries are unmeasured on every rank)."""
        flat = [math.nan if values[i] is None else values[i] for values, _ in columns for i in at]
        every = self.rank.all_gather(torch.tensor(flat, dtype=torch.float64), "inspect statistics")
        ranks = every.cpu().T.tolist()  # one row per entry, one value per rank
        row = iter(ranks)
        for values, how in columns:
            for i in at:
                each = next(row)
                if values[i] is not None and sharded[i]:
                    values[i] = _COMBINE[how](each)


_COMBINE: dict[str, Callable[[list[float]], float]] = {
    "l2": lambda each: math.sqrt(sum(v * v for v in each)),
    "min": lambda each: math.nan if any(map(math.isnan, each)) else min(each),
    "max": lambda each: math.nan if any(map(math.isnan, each)) else max(each),
    "sum": sum,
}
"""How one statistic of a tensor's parts makes the whole tensor's (NaN and Inf carry)."""


def _assemble(
    model: torch.nn.Module,
    modules: Sequence[tuple[str, torch.nn.Module]],
    named: Sequence[tuple[str, torch.Tensor]],
    grads: list[torch.Tensor | None],
    numbers: list[float | None],
    order: dict[str, int],
    target: torch.Tensor,
    source: str,
    duration: float,
    weighted: bool,
    factor: float = 1.0,
    lookups: Set[int] = frozenset(),
) -> RunStats:
    loss_value, loss_finite = numbers[0], bool(numbers[1])
    n, k = len(named), sum(g is not None for g in grads)
    weight_norms = numbers[2 : 2 + n]
    l2, low, high, nz = (numbers[2 + n + i * k : 2 + n + (i + 1) * k] for i in range(4))
    grad_iter = iter(grads)
    present_index = 0
    params = []
    for (name, p), wn in zip(named, weight_norms, strict=False):
        module = name.rpartition(".")[0]
        g = next(grad_iter) if p.requires_grad else None
        if g is None:
            params.append(_param(name, module, p, wn or 0.0, order.get(module), id(p) in lookups))
            continue
        i = present_index
        present_index += 1
        lo, hi, nonzero = low[i], high[i], nz[i]
        if lo is None or hi is None:  # not measured: the norm stands in (finite, non-zero)
            biggest, finite = None, math.isfinite(l2[i] or 0.0)
        else:
            both = lo + hi
            biggest = max(abs(lo), abs(hi)) if not math.isnan(both) else math.nan
            finite = math.isfinite(lo) and math.isfinite(hi)
        zeros = None if nonzero is None else 1.0 - nonzero / max(p.numel(), 1)
        if zeros is None and lo == 0 and hi == 0:
            zeros = 1.0  # all-zero, by its extremes
        params.append(
            ParamStats(
                name=name,
                module=module,
                shape=tuple(p.shape),
                dtype=str(p.dtype).removeprefix("torch."),
                requires_grad=True,
                has_grad=True,
                grad_norm=(l2[i] or 0.0) * factor,
                grad_max=None if biggest is None else biggest * factor,
                weight_norm=wn or 0.0,
                zero_fraction=zeros,
                finite=finite,
                depth=order.get(module),
                lookup=id(p) in lookups,
            )
        )
    return RunStats(
        params=tuple(params),
        modules=tuple(
            ModuleStats(name, type(m).__name__, name in order, order.get(name))
            for name, m in modules
        ),
        loss_value=None if weighted else loss_value,
        loss_finite=loss_finite,
        loss_requires_grad=target.requires_grad,
        loss_source=source,
        duration_s=duration,
        model_class=type(model).__name__,
        device=str(target.device),
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
