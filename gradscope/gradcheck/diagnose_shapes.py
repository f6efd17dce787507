"""The diagnosis patterns read off where the entries sit (gradscope.gradcheck.diagnose tries
them in order): a transposed gradient or operand, a mismatch only at the edges, a gradient
moved by an index."""

from __future__ import annotations

import torch

from gradscope.gradcheck.compared import (
    Compared,
    Context,
    Fit,
    dense,
    explains,
    fits,
    multi,
    positions,
    residual,
    residual_sparse,
)
from gradscope.gradcheck.jacobian import Tolerance
from gradscope.gradcheck.results import Diagnosis


def transposed(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    """The gradient (or the incoming gradient) transposed, or two axes swapped: the first
    permutation that explains the block (a symmetric Jacobian's transpose never does)."""
    if not c.block.full:
        return None
    a, n = c.block.analytical, c.block.numerical
    flip_in, flip_out = _transpose(ctx.input_shape), _transpose(ctx.output_shape)
    if flip_in is not None:
        fit = residual_sparse(a.permuted(None, flip_in), n, tol)
        if explains(fit, c, tol):
            return fit, Diagnosis(
                "transposed",
                f"the gradient of {ctx.input_label} is the transpose "
                f"of the right one: a missing or extra .t() / .transpose() in "
                f"{ctx.code}",
                {"side": "input"},
            )
    for d1, d2 in _axis_pairs(ctx.input_shape):
        fit = residual_sparse(a.permuted(None, _swap(ctx.input_shape, d1, d2)), n, tol)
        if explains(fit, c, tol):
            return fit, Diagnosis(
                "transposed",
                f"the gradient of {ctx.input_label} has its dimensions {d1} and {d2} "
                f"swapped: a wrong permute / transpose / view in {ctx.code}",
                {"side": "input", "dims": [d1, d2]},
            )
    if flip_out is None:
        return None
    fit = residual_sparse(a.permuted(flip_out, None), n, tol)
    if not explains(fit, c, tol):
        return None
    if _numel(ctx.input_shape) < _numel(ctx.output_shape):
        return fit, Diagnosis(
            "broadcast-axis",
            f"the gradient of {ctx.input_label}, broadcast in forward, is summed over "
            f"the wrong dimension of {ctx.output_label}'s gradient in {ctx.code} (sum "
            "over the dimensions forward broadcast it along)",
            {"side": "output"},
        )
    return fit, Diagnosis(
        "transposed",
        f"{ctx.code} treats the incoming gradient of "
        f"{ctx.output_label} as transposed: a missing or extra .t()",
        {"side": "output"},
    )


def _transpose(shape: tuple[int, ...]) -> torch.Tensor | None:
    """The flat-index permutation that swaps the last two (equal) dims; None if there are none."""
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return None
    return _swap(shape, len(shape) - 2, len(shape) - 1)


def _swap(shape: tuple[int, ...], d1: int, d2: int) -> torch.Tensor:
    """The flat-index permutation that swaps dims d1 and d2 (of equal size)."""
    return torch.arange(_numel(shape)).reshape(shape).transpose(d1, d2).reshape(-1)


def _axis_pairs(shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """Pairs of equal-size dims (> 1) other than the last two, which `_transpose` tries."""
    last = (len(shape) - 2, len(shape) - 1)
    return [
        (d1, d2)
        for d1 in range(len(shape))
        for d2 in range(d1 + 1, len(shape))
        if shape[d1] == shape[d2] > 1 and (d1, d2) != last
    ]


def operand_transposed(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    """The analytical Jacobian is the numerical one transposed (output and input indices
    exchanged): backward multiplies grad_output by another operand transposed, `g @ b`
    for `g @ b.t()`. The entries that agree are where the operand equals its transpose
    (its diagonal), which is no mask and no branch."""
    block = c.block
    m, n = block.analytical.shape
    if not block.full or m != n or ctx.input_shape != ctx.output_shape or m * n > SHIFT_CAP:
        return None
    a, num = dense(block.analytical), dense(block.numerical)
    fit = residual(a, num.t(), tol)
    if float(num.abs().max()) <= tol.atol or not explains(fit, c, tol):
        return None
    return fit, Diagnosis(
        "transposed",
        f"the gradient of {ctx.input_label} is computed with another operand transposed "
        f"(the analytical Jacobian is the numerical one transposed): a missing or extra "
        f".t() on the operand grad_output is multiplied by in {ctx.code}, e.g. g @ b "
        "where g @ b.t() is meant",
        {"side": "operand"},
    )


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for size in shape:
        out *= size
    return out


EDGE_FRACTION = 4
"""A mismatch is at a boundary when it lies within size // EDGE_FRACTION (at least 2)
positions of the first or last index of a dimension of at least MIN_EDGE_SIZE."""


MIN_EDGE_SIZE = 8


def boundary(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """Every mismatch at the first/last positions of the dimensions, the interior matching:
    the padding or edge handling (reflect, symmetric, replicate) differs in backward.

    One dimension: within size // 4 of an end; an image's rows and columns together:
    within size // 8 of an end of either. At least two distinct positions, so a lone
    mismatch that happens to sit at an edge stays `masked`.
    """
    bad, good = c.bad, ~c.bad
    if bool(bad.all()):
        return None
    bad_rows, bad_cols = positions(c, ctx, bad)
    good_rows, good_cols = positions(c, ctx, good)
    for side, shape, bad_at, good_at, label in (
        ("input", ctx.input_shape, bad_cols, good_cols, ctx.input_label),
        ("output", ctx.output_shape, bad_rows, good_rows, ctx.output_label),
    ):
        bad_idx, good_idx = multi(bad_at, shape), multi(good_at, shape)
        long = [d for d, size in enumerate(shape) if size >= MIN_EDGE_SIZE]
        groups = [[d] for d in long] + ([long] if len(long) > 1 else [])
        for dims in groups:
            edge = _edges(bad_idx, good_idx, shape, dims)
            if edge is not None:
                name = label.split(" ")[0]
                where = "; ".join(
                    f"dimension {d}: "
                    f"{_spans(sorted(set(bad_idx[:, d].tolist()) & set(edge[d])), shape[d])} "
                    f"of {shape[d]}"
                    for d in dims
                )
                return Diagnosis(
                    "boundary",
                    f"gradients of {ctx.input_label} match in the interior and differ only "
                    f"near the edges of {name} ({where}): the padding or edge handling "
                    f"(reflect, symmetric, replicate, zero) in {ctx.code} is not the one "
                    "forward uses",
                    {
                        "side": side,
                        "dims": dims,
                        "positions": sorted(set(bad_idx[:, dims[0]].tolist())),
                        "mismatched": int(bad.sum()),
                        "compared": int(bad.numel()),
                    },
                )
    return None


def _edges(
    bad_idx: torch.Tensor, good_idx: torch.Tensor, shape: tuple[int, ...], dims: list[int]
) -> dict[int, list[int]] | None:
    """Each dimension's edge positions, when every mismatch is near an edge of `dims`, some
    match lies inside, and the mismatches sit at two positions or more; None if not."""
    near = torch.zeros(bad_idx.shape[0], dtype=torch.bool)
    inside = torch.ones(good_idx.shape[0], dtype=torch.bool)
    edge: dict[int, list[int]] = {}
    for d in dims:
        size = shape[d]
        k = max(2, size // (EDGE_FRACTION if len(dims) == 1 else 2 * EDGE_FRACTION))
        edge[d] = [p for p in range(size) if p < k or p >= size - k]
        near |= (bad_idx[:, d] < k) | (bad_idx[:, d] >= size - k)
        inside &= (good_idx[:, d] >= k) & (good_idx[:, d] < size - k)
    spots = {tuple(row) for row in bad_idx[:, dims].tolist()}
    return edge if bool(near.all()) and bool(inside.any()) and len(spots) >= 2 else None


def _spans(positions: list[int], size: int) -> str:
    head = [p for p in positions if p < size // 2]
    tail = [p for p in positions if p >= size // 2]
    parts = [f"{g[0]}..{g[-1]}" if len(g) > 1 else str(g[0]) for g in (head, tail) if g]
    return " and ".join(parts)


SHIFT_CAP = 1 << 20
"""Index-shift is tested on full blocks of at most this many entries (dense copies)."""


SHIFTS = (1, -1, 2, -2)


def index_shift(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """The analytical Jacobian is the numerical one moved by one or two positions along a
    dimension: an off-by-one index in backward (i vs i + 1, a slice start, a roll)."""
    block = c.block
    m, n = block.analytical.shape
    if not block.full or m * n > SHIFT_CAP:
        return None
    a, num = dense(block.analytical), dense(block.numerical)
    for side, shape in (("input", ctx.input_shape), ("output", ctx.output_shape)):
        a3 = a.reshape(m, *shape) if side == "input" else a.reshape(*shape, n)
        n3 = num.reshape(m, *shape) if side == "input" else num.reshape(*shape, n)
        offset = 1 if side == "input" else 0
        for d, size in enumerate(shape):
            for s in SHIFTS:
                if abs(s) >= size - 1:
                    continue
                dim = d + offset
                got = a3.narrow(dim, max(0, -s), size - abs(s))
                want = n3.narrow(dim, max(0, s), size - abs(s))
                if float(want.abs().max()) <= tol.atol or not fits(got, want, tol):
                    continue
                if bool((got.abs() > tol.atol).sum() * 2 < (a3.abs() > tol.atol).sum()):
                    continue  # the fit must cover most of the analytical mass
                name = (ctx.input_label if side == "input" else ctx.output_label).split(" ")[0]
                return Diagnosis(
                    "index-shift",
                    f"the gradient of {ctx.input_label} is the right one moved by {s:+d} "
                    f"along dimension {d} of {name} (analytical[i] = numerical[i {s:+d}]): "
                    f"an off-by-one index in {ctx.code} (i vs i + 1, a slice start, a roll)",
                    {"side": side, "dim": d, "shift": s},
                )
    return None
