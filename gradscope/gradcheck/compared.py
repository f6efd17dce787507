"""One block of a Jacobian check compared once, analytical against numerical, and the
readings the diagnosis patterns share (gradscope.gradcheck.diagnose)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from gradscope.gradcheck.jacobian import Tolerance, unravel
from gradscope.gradcheck.results import Diagnosis, Element
from gradscope.gradcheck.stages import Block, Sparse

FIT = 10.0

Fit = tuple[float, Diagnosis]
"""A pattern's diagnosis with how tightly it fits (its residual)."""


WORST = 5


@dataclass
class Context:
    """What the diagnosis needs to know beyond the numbers."""

    input_label: str
    input_shape: tuple[int, ...]
    output_label: str
    output_shape: tuple[int, ...]
    values: torch.Tensor
    """The input's values, flattened (to describe where a masked mismatch happens)."""
    linear: bool = True
    output_requires_grad: bool = True
    check: str = "backward"
    others: list[tuple[str, Callable[[], Sparse]]] = field(default_factory=list)
    """Same-shape inputs: (label, their numerical block on the same rows and columns)."""
    stepped: bool = False
    """Every value of the output is a whole number: a step function of its inputs (a
    spike, a rounding), whose numerical derivative is 0 wherever it is defined."""
    complex_sides: tuple[bool, bool] = (False, False)
    """(output, input) is complex, checked as (re, im) pairs: the last index 1 is the
    imaginary part (complex_view)."""

    @property
    def code(self) -> str:
        """The user's method that produced the analytical values."""
        return "jvp" if self.check == "forward-ad" else "backward"


@dataclass
class Compared:
    """One block compared once, on the entries non-negligible in either side or mismatched.

    The rest (both within atol of zero) agree and fit every pattern, so the patterns are
    tested on these entries only.
    """

    block: Block
    idx: torch.Tensor
    """Flat keys `row * width + col` of the compared entries, sorted."""
    a: torch.Tensor
    n: torch.Tensor
    bad: torch.Tensor
    """|a - n| > atol + rtol |n|, or not finite, per compared entry."""
    max_abs: float
    width: int


def compare_block(block: Block, tol: Tolerance) -> Compared:
    idx = torch.unique(torch.cat([block.analytical.keys, block.numerical.keys]))
    a, n = block.analytical.at(idx), block.numerical.at(idx)
    err = (a - n).abs()
    bad = ~(err <= tol.atol + tol.rtol * n.abs())  # NaN compares False: it counts as bad
    keep = (a.abs() > tol.atol) | (n.abs() > tol.atol) | bad
    max_abs = float(err.max()) if err.numel() else 0.0
    return Compared(
        block, idx[keep], a[keep], n[keep], bad[keep], max_abs, block.analytical.shape[1]
    )


def errors(c: Compared, tol: Tolerance) -> tuple[float, float | None]:
    """Max |a - n|, and max |a - n| / |n| over entries with |n| > atol; both over the finite
    entries (the non-finite ones get their own diagnosis, naming them)."""
    finite = torch.isfinite(c.a) & torch.isfinite(c.n)
    a, n = c.a[finite], c.n[finite]
    err = (a - n).abs()
    scale = n.abs()
    keep = scale > tol.atol
    rel = err[keep] / scale[keep]
    max_abs = c.max_abs if bool(finite.all()) else (float(err.max()) if err.numel() else 0.0)
    return max_abs, (float(rel.max()) if rel.numel() else None)


def worst(c: Compared, ctx: Context, k: int = WORST) -> tuple[Element, ...]:
    err = (c.a - c.n).abs().nan_to_num(float("inf"))
    if err.numel() == 0:
        return ()
    out: list[Element] = []
    for pos in torch.topk(err, min(k, err.numel())).indices.tolist():
        r, col = divmod(int(c.idx[pos]), c.width)
        row = r if c.block.rows is None else c.block.rows[r]
        col = col if c.block.cols is None else c.block.cols[col]
        out.append(
            Element(
                unravel(row, ctx.output_shape),
                unravel(col, ctx.input_shape),
                float(c.a[pos]),
                float(c.n[pos]),
            )
        )
    return tuple(out)


def residual(a: torch.Tensor, p: torch.Tensor, tol: Tolerance) -> float:
    """How far `a` is from the pattern's prediction `p`, in units of the check's own tolerance
    (max |a - p| / (atol + rtol |p|)): at most 1 fits every entry as the check would, at most
    FIT fits loosely; inf where an entry is not finite."""
    if not a.numel():
        return 0.0
    ratio = (a - p).abs() / (tol.atol + tol.rtol * p.abs())
    return float(ratio.nan_to_num(float("inf")).max())


def residual_sparse(a: Sparse, p: Sparse, tol: Tolerance) -> float:
    """residual on every entry either block has."""
    keys = torch.unique(torch.cat([a.keys, p.keys]))
    return residual(a.at(keys), p.at(keys), tol)


def fits(a: torch.Tensor, p: torch.Tensor, tol: Tolerance) -> bool:
    return bool(((a - p).abs() <= FIT * (tol.atol + tol.rtol * p.abs())).all())


def explains(fit: float, c: Compared, tol: Tolerance) -> bool:
    """A pattern explains the block when it fits (within FIT) and fits at least twice as
    tightly as no pattern at all: a transpose of a symmetric Jacobian changes nothing, so a
    small error on one is never called transposed on the loose fit alone."""
    return fit <= FIT and 2 * fit < residual(c.a, c.n, tol)


def positions(c: Compared, ctx: Context, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat (output row, input column) indices of the compared entries under `mask`."""
    rows, cols = c.idx[mask] // c.width, c.idx[mask] % c.width
    if c.block.rows is not None:
        rows = torch.tensor(c.block.rows, dtype=torch.long)[rows]
    if c.block.cols is not None:
        cols = torch.tensor(c.block.cols, dtype=torch.long)[cols]
    return rows, cols


def multi(flat: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Flat indices → (k, ndim) multi-indices, row-major."""
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat = flat // size
    return torch.stack(list(reversed(out)), 1) if out else flat.reshape(-1, 0)


def dense(block: Sparse) -> torch.Tensor:
    out = torch.zeros(block.shape[0] * block.shape[1], dtype=torch.float64)
    out[block.keys] = block.values.double()
    return out.reshape(block.shape)
