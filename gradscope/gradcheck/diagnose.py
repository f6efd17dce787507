"""Name the pattern behind a Jacobian mismatch, from one block of analytical vs numerical.

Each pattern is tried in order and the first that fits wins; "fits" means every
entry agrees within FIT times the check's own tolerance, so a diagnosis is a
statement about every compared entry, not an average.
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
    others: list[tuple[str, Callable[[], torch.Tensor]]] = field(default_factory=list)
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
    """Max |a - n|, and max |a - n| / |n| over entries with |n| > atol."""
    scale = c.n.abs()
    keep = scale > tol.atol
    rel = (c.a[keep] - c.n[keep]).abs() / scale[keep]
    return c.max_abs, (float(rel.max()) if rel.numel() else None)


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
        _not_linear,
        _zero_numerical,
        _zero_analytical,
        _wrong_order,
        _transposed,
        _sign_flip,
        _constant_factor,
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
    if flip_out is not None and _fits_sparse(a.permuted(flip_out, None), n, tol):
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
    return torch.arange(_numel(shape)).reshape(shape).transpose(-1, -2).reshape(-1)


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
