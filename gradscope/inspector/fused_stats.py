"""The pass's statistics, read with one host sync: one fused L2 norm over weights and
gradients together plus, for small tensors and row-lookup tables only, aminmax and a zero
count (the cost budget: <= 1.05x the bare step at 124M parameters, performance.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from gradscope.distributed.norms import local
from gradscope.inspector.shard_stats import Shards


@dataclass(frozen=True)
class GradNumbers:
    """One gradient's statistics (None: not measured)."""

    l2: float | None
    low: float | None
    high: float | None
    nonzeros: float | None


@dataclass(frozen=True)
class FusedNumbers:
    """What `fused_stats` read back, by name."""

    loss: float
    """NaN where the loss is not one number."""
    loss_finite: bool
    weight_norms: list[float | None]
    """One per parameter."""
    grads: list[GradNumbers]
    """One per gradient that is not None, in the parameters' order."""


@dataclass
class _Columns:
    """The gradients' statistics as columns (one entry per present gradient), as the FSDP2
    shards combine them in place."""

    l2: list[float | None]
    low: list[float | None]
    high: list[float | None]
    nonzeros: list[float | None]

    def records(self) -> list[GradNumbers]:
        rows = zip(self.l2, self.low, self.high, self.nonzeros, strict=True)
        return [GradNumbers(*row) for row in rows]


@dataclass(frozen=True)
class Plan:
    """What `fused_stats` measures per gradient besides its L2 norm."""

    extremes: bool
    """max|g| (min and max)."""
    zeros: bool
    """The number of exactly-zero elements."""


EXACT_MAX = 1 << 20
"""Gradients up to this many elements also get max|g| (a fused pass that costs nothing at this
size); larger ones only where a rule needs it: see `plans`."""


def owners(modules: Iterable[tuple[str, torch.nn.Module]]) -> dict[int, list[bool]]:
    """id(parameter) → for each module that owns it, whether that module is a lookup table."""
    lookup = (torch.nn.Embedding, torch.nn.EmbeddingBag)
    found: dict[int, list[bool]] = {}
    for _, m in modules:
        for p in m._parameters.values():
            if p is not None:
                found.setdefault(id(p), []).append(isinstance(m, lookup))
    return found


def plans(owned: dict[int, list[bool]], params: Sequence[torch.Tensor]) -> list[Plan]:
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
    out = []
    for p in params:
        kinds = owned.get(id(p), [False])
        table = p.is_sparse or all(kinds)
        out.append(Plan(p.numel() <= EXACT_MAX, table))
    return out


def fused_stats(
    loss: torch.Tensor,
    params: list[torch.Tensor],
    grads: list[torch.Tensor | None],
    planned: Sequence[Plan],
) -> FusedNumbers:
    """The loss, the weight norms and, per gradient present, its L2 norm, min, max and
    non-zero count.

    One fused L2 over weights and gradients together (half precision accumulated in float32,
    so it cannot overflow); max and min over the small gradients (`_extremes`), the
    elements of non-zero rows where the plan names it. Min and max propagate NaN and Inf, so
    they are the exact non-finite test (an L2 norm can overflow without any Inf). Read back
    with one host sync; a second one only when a gradient without extremes has a zero or
    non-finite norm, to make that verdict exact, or when a norm underflowed. None: not
    measured. (torch's inf-norm would give max|g| in one call but is ~15x slower on a CPU.)
    """
    given = [(g, plan) for g, plan in zip(grads, planned, strict=True) if g is not None]
    present = [_dense(local(g)) for g, _ in given]
    small = [i for i, (_, plan) in enumerate(given) if plan.extremes]
    counted = [i for i, (_, plan) in enumerate(given) if plan.zeros]
    read = _read_back(_first_pass(loss.detach(), params, present, small, counted))
    norms = read.get("norms", [])
    weights: list[float | None] = list(norms[: len(params)])
    k = len(present)
    columns = _Columns(
        list(norms[len(params) :]),
        _placed(read.get("low", []), small, k),
        _placed(read.get("high", []), small, k),
        _placed(read.get("nonzeros", []), counted, k),
    )
    shards = Shards.of(params, [g for g, _ in given])  # FSDP2: each rank holds a part
    if shards:
        shards.weights([(weights, "l2")], range(len(params)))
        shards.grads(_all(columns), range(k))
    _exact_where_in_doubt(columns, present, loss.device, shards)
    _float64_where_underflowed(columns, present, shards)
    (loss_value,), (loss_finite,) = read["loss"], read["loss_finite"]
    return FusedNumbers(loss_value, bool(loss_finite), weights, columns.records())


def _first_pass(
    loss: torch.Tensor,
    params: list[torch.Tensor],
    present: list[torch.Tensor],
    small: list[int],
    counted: list[int],
) -> dict[str, torch.Tensor]:
    """The fused statistics as float64 vectors on the loss's device, by name."""
    f64 = torch.float64
    device = loss.device
    parts = {
        "loss": loss.reshape(-1)[:1].real.to(f64)
        if loss.numel() == 1
        else torch.full((1,), math.nan, dtype=f64, device=device),
        "loss_finite": torch.isfinite(loss).all().reshape(1).to(f64),
    }
    norms = _norms(params, present)
    if norms:
        parts["norms"] = _gather(norms, device)
    if small:
        parts["low"], parts["high"] = _extremes([present[i] for i in small], device)
    if counted:
        nonzero = [_in_nonzero_rows(present[i]).to(device=device, dtype=f64) for i in counted]
        parts["nonzeros"] = torch.stack(nonzero)
    return parts


def _norms(params: list[torch.Tensor], present: list[torch.Tensor]) -> list[torch.Tensor]:
    """L2 norms of the weights then the gradients: one fused call over those torch's norms
    take, the stored values of the others apart."""
    weights_in = [_dense(local(p)) for p in params]
    counts = [i for i, t in enumerate(weights_in) if not _normable(t)]
    if counts:  # frozen int8/float8 storage (a quantized base): no gradient, its norm apart
        weights_in = [t for t in weights_in if _normable(t)]
    tensors = weights_in + present  # under no_grad
    norms: list[torch.Tensor] = []
    if tensors:
        low = any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)
        norms = list(torch._foreach_norm(tensors, 2, dtype=torch.float32 if low else None))
    for i in counts:
        norms.insert(i, _stored_norm(local(params[i])))
    return norms


def _read_back(parts: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    """The named vectors read to the host with one sync, each under its name again."""
    numbers: list[float] = torch.cat(list(parts.values())).tolist()
    out, start = {}, 0
    for name, part in parts.items():
        out[name] = numbers[start : start + len(part)]
        start += len(part)
    return out


def _placed(values: list[float], at: list[int], k: int) -> list[float | None]:
    """`values` put at the positions `at` of a column of `k` (None elsewhere)."""
    column: list[float | None] = [None] * k
    for i, value in zip(at, values, strict=True):
        column[i] = value
    return column


def _all(columns: _Columns) -> list[tuple[list[float | None], str]]:
    return [
        (columns.l2, "l2"),
        (columns.low, "min"),
        (columns.high, "max"),
        (columns.nonzeros, "sum"),
    ]


def _exact_where_in_doubt(
    columns: _Columns, present: list[torch.Tensor], device: torch.device, shards: Shards | None
) -> None:
    """Gradients without extremes whose norm says all-zero or non-finite: measured exactly."""
    l2, lo, hi, nz = columns.l2, columns.low, columns.high, columns.nonzeros
    doubt = [i for i in range(len(present)) if hi[i] is None and not 0 < (l2[i] or 0) < math.inf]
    if not doubt:
        return
    again = _exact([present[i] for i in doubt], device).tolist()
    for j, i in enumerate(doubt):
        lo[i], hi[i], nz[i] = again[0][j], again[1][j], again[2][j]
    if shards:
        shards.grads([(lo, "min"), (hi, "max"), (nz, "sum")], doubt)


def _float64_where_underflowed(
    columns: _Columns, present: list[torch.Tensor], shards: Shards | None
) -> None:
    """Non-zero elements whose squares underflow float32 (|g| < 1e-19): a float64 norm."""
    l2, lo, hi = columns.l2, columns.low, columns.high
    tiny = [i for i in range(len(present)) if l2[i] == 0 and (hi[i] or lo[i])]
    if not tiny:
        return
    norms64 = [torch.linalg.vector_norm(present[i].double()) for i in tiny]
    for i, norm in zip(tiny, torch.stack(norms64).tolist(), strict=True):
        l2[i] = norm
    if shards:
        shards.grads([(l2, "l2")], tiny)


def _dense(g: torch.Tensor) -> torch.Tensor:
    """What the statistics read: the values of a sparse gradient, |g| of a complex one."""
    if g.is_sparse:
        g = g.coalesce().values()
    if g.is_complex():
        g = g.abs()
    return g if g.numel() else g.new_zeros(1)


def _exact(grads: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """[min, max, nonzeros] per gradient, as one float64 tensor of shape (3, n)."""
    f64 = torch.float64
    rows = [
        torch.stack([*torch.aminmax(g), g.count_nonzero()]).to(device=device, dtype=f64)
        for g in grads
    ]
    return torch.stack(rows).T if rows else torch.empty((3, 0), dtype=f64, device=device)


def _extremes(grads: list[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(mins, maxes) as two float64 vectors. On a GPU two fused kernels (max, and max of the
    negated copies); on a CPU one aminmax per tensor reads each once and copies nothing
    (0.29 ms against 0.72 ms for 66 tensors of a small CNN)."""
    if all(g.device.type == "cpu" for g in grads):
        pairs = [torch.aminmax(g) for g in grads]
        return _gather([p.min for p in pairs], device), _gather([p.max for p in pairs], device)
    highs = torch._foreach_max(grads)
    lows = torch._foreach_max(torch._foreach_neg(grads))
    return -_gather(lows, device), _gather(highs, device)


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
