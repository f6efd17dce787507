"""Name the pattern behind a Jacobian mismatch, from one block of analytical vs numerical.

Each pattern is tried in order and the first that fits wins; "fits" means every
entry agrees within FIT times the check's own tolerance, so a diagnosis is a
statement about every compared entry, not an average. A pattern names a cause only on
its own evidence: look-alikes (an operand transposed, a permuted axis, a broadcast
summed over the wrong axis) get their own name or the plain mismatch, never a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from gradscope.gradcheck.jacobian import Tolerance, unravel
from gradscope.gradcheck.results import Diagnosis, Element
from gradscope.gradcheck.stages import Block, Sparse

FIT = 10.0
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


def _fits(a: torch.Tensor, p: torch.Tensor, tol: Tolerance) -> bool:
    return bool(((a - p).abs() <= FIT * (tol.atol + tol.rtol * p.abs())).all())


def _fits_sparse(a: Sparse, p: Sparse, tol: Tolerance) -> bool:
    """_fits on every entry either block has."""
    keys = torch.unique(torch.cat([a.keys, p.keys]))
    return _fits(a.at(keys), p.at(keys), tol)


def diagnose(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """The first pattern that fits; None when the block shows no mismatch at all."""
    if not bool(c.bad.any()) and ctx.linear:
        return None
    for rule in (
        _not_finite,
        _not_linear,
        _zero_numerical,
        _zero_analytical,
        _wrong_order,
        _transposed,
        _operand_transposed,
        _sign_flip,
        _constant_factor,
        _boundary,
        _masked_by_value,
        _index_shift,
        _masked,
    ):
        found = rule(c, tol, ctx)
        if found is not None:
            return found
    return Diagnosis(
        "mismatch",
        f"analytical and numerical gradients of {ctx.output_label} "
        f"w.r.t. {ctx.input_label} disagree with no simple pattern; compare the "
        f"{ctx.code} formula term by term with the forward",
    )


def _not_linear(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    if ctx.linear:
        return None
    return Diagnosis(
        "not-scaled-by-grad-output",
        "doubling grad_output did not double the "
        f"gradient of {ctx.input_label}: backward ignores grad_output or is not "
        "deterministic (multiply the local derivative by grad_output)",
    )


def _zero_numerical(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    if c.n.numel() and float(c.n.abs().max()) > tol.atol:
        return None
    return Diagnosis(
        "spurious-grad",
        f"{ctx.output_label} does not depend on "
        f"{ctx.input_label} numerically, yet {ctx.code} returns a non-zero gradient "
        "for it (a gradient meant for another input, or a stray term)",
        {"max_analytical": float(c.a.abs().max()) if c.a.numel() else 0.0},
    )


def _zero_analytical(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    if c.a.numel() and float(c.a.abs().max()) > tol.atol:
        return None
    details = {"max_numerical": float(c.n.abs().max())}
    if ctx.check == "second-order":
        return Diagnosis(
            "zero-grad",
            f"backward's result {ctx.output_label} does not depend on "
            f"{ctx.input_label} through autograd although it does numerically: "
            "backward detaches it (.detach(), .data, numpy, no_grad), so "
            "second-order gradients are lost",
            details,
        )
    if not ctx.output_requires_grad:
        return Diagnosis(
            "zero-grad",
            f"{ctx.output_label} does not require grad although it "
            f"depends on {ctx.input_label}: the forward cut the graph (detach(), "
            ".data, .item(), numpy, torch.no_grad)",
            details,
        )
    if c.block.none:
        return Diagnosis(
            "none-grad",
            f"backward returned None for {ctx.input_label}, but "
            f"{ctx.output_label} depends on it: return its gradient in that "
            "position of backward's result",
            details,
        )
    return Diagnosis(
        "zero-grad",
        f"the analytical gradient of {ctx.input_label} is zero "
        f"everywhere while the numerical one is not: {ctx.code} detaches, "
        "overwrites or zeroes it",
        details,
    )


def _wrong_order(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    for label, numerical in ctx.others:
        if _fits_sparse(c.block.analytical, numerical(), tol):
            return Diagnosis(
                "wrong-order",
                f"the gradient returned for {ctx.input_label} is the "
                f"gradient of {label}: {ctx.code} returns gradients in the wrong "
                "order (one per forward argument, in forward's order)",
                {"matches": label},
            )
    return None


def _transposed(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    if not c.block.full:
        return None
    a, n = c.block.analytical, c.block.numerical
    flip_in, flip_out = _transpose(ctx.input_shape), _transpose(ctx.output_shape)
    if flip_in is not None and _fits_sparse(a.permuted(None, flip_in), n, tol):
        return Diagnosis(
            "transposed",
            f"the gradient of {ctx.input_label} is the transpose "
            f"of the right one: a missing or extra .t() / .transpose() in "
            f"{ctx.code}",
            {"side": "input"},
        )
    for d1, d2 in _axis_pairs(ctx.input_shape):
        if _fits_sparse(a.permuted(None, _swap(ctx.input_shape, d1, d2)), n, tol):
            return Diagnosis(
                "transposed",
                f"the gradient of {ctx.input_label} has its dimensions {d1} and {d2} "
                f"swapped: a wrong permute / transpose / view in {ctx.code}",
                {"side": "input", "dims": [d1, d2]},
            )
    if flip_out is not None and _fits_sparse(a.permuted(flip_out, None), n, tol):
        if _numel(ctx.input_shape) < _numel(ctx.output_shape):
            return Diagnosis(
                "broadcast-axis",
                f"the gradient of {ctx.input_label}, broadcast in forward, is summed over "
                f"the wrong dimension of {ctx.output_label}'s gradient in {ctx.code} (sum "
                "over the dimensions forward broadcast it along)",
                {"side": "output"},
            )
        return Diagnosis(
            "transposed",
            f"{ctx.code} treats the incoming gradient of "
            f"{ctx.output_label} as transposed: a missing or extra .t()",
            {"side": "output"},
        )
    return None


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


def _operand_transposed(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """The analytical Jacobian is the numerical one transposed (output and input indices
    exchanged): backward multiplies grad_output by another operand transposed, `g @ b`
    for `g @ b.t()`. The entries that agree are where the operand equals its transpose
    (its diagonal), which is no mask and no branch."""
    block = c.block
    m, n = block.analytical.shape
    if not block.full or m != n or ctx.input_shape != ctx.output_shape or m * n > SHIFT_CAP:
        return None
    a, num = _dense(block.analytical), _dense(block.numerical)
    if float(num.abs().max()) <= tol.atol or not _fits(a, num.t(), tol):
        return None
    return Diagnosis(
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


def _sign_flip(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    if not _fits(c.a, -c.n, tol):
        return None
    return Diagnosis(
        "sign-flip",
        f"the gradient of {ctx.input_label} has the wrong sign "
        f"everywhere: a flipped sign in {ctx.code} (d(-x), d(a - b), -sin vs sin)",
        {"factor": -1.0},
    )


def _constant_factor(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    denom = float((c.n * c.n).sum())
    k = float((c.a * c.n).sum()) / denom if denom > 0 else 0.0
    if abs(k - 1) <= tol.rtol or k == 0 or not _fits(c.a, k * c.n, tol):
        return None
    hint = ""
    for whole in (2, 3, 4, 0.5, 1 / 3, 0.25):
        if abs(k - whole) <= FIT * tol.rtol * abs(whole):
            hint = (
                f" (an extra factor {whole:g})"
                if whole > 1
                else f" (a missing factor {1 / whole:g})"
            )
    return Diagnosis(
        "constant-factor",
        f"analytical ≈ {k:.4g} × numerical for "
        f"{ctx.input_label}{hint}: a missing or extra chain-rule factor in "
        f"{ctx.code}",
        {"factor": k},
    )


def _masked_by_value(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """`masked`, when an input-value range holds every mismatch (a condition on values)."""
    if bool(c.bad.all()) or _where(c, c.bad, ctx) is None:
        return None
    return _masked(c, tol, ctx)


def _masked(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    bad = c.bad
    if bool(bad.all()):
        return None
    details: dict[str, object] = {"mismatched": int(bad.sum()), "compared": int(bad.numel())}
    kind = (
        "zeroed where it should not be"
        if bool((c.a[bad].abs() <= tol.atol).all())
        else "not zeroed where it should be"
        if bool((c.n[bad].abs() <= tol.atol).all())
        else "computed by a different formula"
    )
    where = _where(c, bad, ctx)
    if where is None and kind == "computed by a different formula":
        return None  # no zeros on one side, no condition on values: no sign of a mask
    if where:
        details["range"] = where[1]
    text = (
        f"gradients of {ctx.input_label} match except at {details['mismatched']} of "
        f"{details['compared']} non-zero entries, where it is {kind}"
    )
    text += f"; all mismatches are at {where[0]}" if where else ""
    return Diagnosis(
        "masked",
        text + ": a masking/branch error (a condition such as x > 0 or a "
        f"clamp bound handled differently in {ctx.code} than in forward)",
        details,
    )


def _where(c: Compared, bad: torch.Tensor, ctx: Context) -> tuple[str, list[float]] | None:
    """An input-value range holding every mismatched column and no matching one."""
    cols = c.idx % c.width
    if c.block.cols is not None:
        cols = torch.tensor(c.block.cols, dtype=torch.long)[cols]
    values = ctx.values.reshape(-1).double()
    bad_cols = torch.unique(cols[bad])
    good_cols = torch.unique(cols[~bad])
    good_cols = good_cols[~torch.isin(good_cols, bad_cols)]
    if not good_cols.numel():
        return None
    lo, hi = float(values[bad_cols].min()), float(values[bad_cols].max())
    good = values[good_cols]
    if bool(((good >= lo) & (good <= hi)).any()):
        return None
    name = ctx.input_label.split(" ")[0]
    return f"{name} in [{lo:.4g}, {hi:.4g}] (matching elsewhere)", [lo, hi]


def _positions(c: Compared, ctx: Context, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat (output row, input column) indices of the compared entries under `mask`."""
    rows, cols = c.idx[mask] // c.width, c.idx[mask] % c.width
    if c.block.rows is not None:
        rows = torch.tensor(c.block.rows, dtype=torch.long)[rows]
    if c.block.cols is not None:
        cols = torch.tensor(c.block.cols, dtype=torch.long)[cols]
    return rows, cols


def _multi(flat: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Flat indices → (k, ndim) multi-indices, row-major."""
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat = flat // size
    return torch.stack(list(reversed(out)), 1) if out else flat.reshape(-1, 0)


def _not_finite(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """A NaN/inf numerical derivative: the function is not differentiable (or not defined)
    at the sampled point; a NaN/inf analytical one where the numerical is finite: backward
    divides by zero or takes the log of 0."""
    num_bad, ana_bad = ~torch.isfinite(c.n), ~torch.isfinite(c.a)
    if not bool(num_bad.any() | ana_bad.any()):
        return None
    numerical = bool(num_bad.any())
    rows, cols = _positions(c, ctx, num_bad if numerical else ana_bad & ~num_bad)
    # the output elements where it happens; for an elementwise function (same shape) the
    # input element at the same index, whose value says which domain to use
    at = torch.unique(rows if numerical else cols)
    shape = ctx.output_shape if numerical else ctx.input_shape
    label = ctx.output_label if numerical else ctx.input_label
    values = (
        ctx.values.reshape(-1).double()[at]
        if not numerical or ctx.input_shape == ctx.output_shape
        else None
    )
    name, in_name = label.split(" ")[0], ctx.input_label.split(" ")[0]
    shown = ", ".join(
        f"{name}{list(unravel(int(j), shape))}"
        + ("" if values is None else f" ({in_name} = {float(values[k]):.4g})")
        for k, j in enumerate(at[:3].tolist())
    )
    more = f" and {at.numel() - 3} more" if at.numel() > 3 else ""
    details: dict[str, object] = {
        "elements": [list(unravel(int(j), shape)) for j in at[:10].tolist()],
    }
    if values is not None:
        details["values"] = [float(v) for v in values[:10].tolist()]
    if not numerical:
        return Diagnosis(
            "non-finite-grad",
            f"{ctx.code} returns NaN or inf for {ctx.input_label} at {shown}{more}, where the "
            "numerical derivative is finite: a division by zero, log(0) or 0 * inf in the "
            f"{ctx.code} formula",
            details,
        )
    if values is not None and bool((values <= 0).all()):
        hint = "--domain positive"
    else:
        hint = "--domain LOW,HIGH"
    details["suggest"] = hint
    return Diagnosis(
        "not-differentiable",
        f"the numerical derivative w.r.t. {ctx.input_label} is not finite at {shown}{more}: the "
        f"function is not differentiable (or not defined) at the sampled point, so no "
        f"gradient can be checked there; check it where it is, e.g. with {hint} "
        f"(--tensor or gradcheck_inputs for a chosen point)",
        details,
    )


EDGE_FRACTION = 4
"""A mismatch is at a boundary when it lies within size // EDGE_FRACTION (at least 2)
positions of the first or last index of a dimension of at least MIN_EDGE_SIZE."""
MIN_EDGE_SIZE = 8


def _boundary(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """Every mismatch at the first/last positions of the dimensions, the interior matching:
    the padding or edge handling (reflect, symmetric, replicate) differs in backward.

    One dimension: within size // 4 of an end; an image's rows and columns together:
    within size // 8 of an end of either. At least two distinct positions, so a lone
    mismatch that happens to sit at an edge stays `masked`.
    """
    bad, good = c.bad, ~c.bad
    if bool(bad.all()):
        return None
    bad_rows, bad_cols = _positions(c, ctx, bad)
    good_rows, good_cols = _positions(c, ctx, good)
    for side, shape, bad_at, good_at, label in (
        ("input", ctx.input_shape, bad_cols, good_cols, ctx.input_label),
        ("output", ctx.output_shape, bad_rows, good_rows, ctx.output_label),
    ):
        bad_idx, good_idx = _multi(bad_at, shape), _multi(good_at, shape)
        long = [d for d, size in enumerate(shape) if size >= MIN_EDGE_SIZE]
        groups = [[d] for d in long] + ([long] if len(long) > 1 else [])
        for dims in groups:
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
            if bool(near.all()) and bool(inside.any()) and len(spots) >= 2:
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


def _spans(positions: list[int], size: int) -> str:
    head = [p for p in positions if p < size // 2]
    tail = [p for p in positions if p >= size // 2]
    parts = [f"{g[0]}..{g[-1]}" if len(g) > 1 else str(g[0]) for g in (head, tail) if g]
    return " and ".join(parts)


SHIFT_CAP = 1 << 20
"""Index-shift is tested on full blocks of at most this many entries (dense copies)."""
SHIFTS = (1, -1, 2, -2)


def _index_shift(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """The analytical Jacobian is the numerical one moved by one or two positions along a
    dimension: an off-by-one index in backward (i vs i + 1, a slice start, a roll)."""
    block = c.block
    m, n = block.analytical.shape
    if not block.full or m * n > SHIFT_CAP:
        return None
    a, num = _dense(block.analytical), _dense(block.numerical)
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
                if float(want.abs().max()) <= tol.atol or not _fits(got, want, tol):
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


def _dense(block: Sparse) -> torch.Tensor:
    out = torch.zeros(block.shape[0] * block.shape[1], dtype=torch.float64)
    out[block.keys] = block.values.double()
    return out.reshape(block.shape)
