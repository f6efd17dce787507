"""Name the pattern behind a Jacobian mismatch, from one block of analytical vs numerical.

Each pattern is tried in order and the first that fits wins; "fits" means every
entry agrees within FIT times the check's own tolerance, so a diagnosis is a
statement about every compared entry, not an average. The patterns that map the whole
block are weighed against each other (the tightest fit wins, and none wins that fits no
better than the block as it is: a symmetric Jacobian's transpose is itself). A pattern
names a cause only on its own evidence: look-alikes (an operand transposed, a permuted
axis, a broadcast summed over the wrong axis) get their own name or the plain mismatch,
never a wrong one.
The patterns read off where the entries sit are in diagnose_shapes; the comparison they all
read, in compared.
"""

from __future__ import annotations

import torch

from gradscope.gradcheck.compared import (
    FIT,
    Compared,
    Context,
    Fit,
    explains,
    positions,
    residual,
    residual_sparse,
)
from gradscope.gradcheck.diagnose_complex import adjoint, conjugated
from gradscope.gradcheck.diagnose_shapes import (
    boundary,
    index_shift,
    operand_transposed,
    transposed,
)
from gradscope.gradcheck.jacobian import Tolerance, unravel
from gradscope.gradcheck.results import SURROGATE, Diagnosis


def diagnose(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """The first pattern that fits; None when the block shows no mismatch at all."""
    if not bool(c.bad.any()) and ctx.linear:
        return None
    for rule in (_not_finite, _not_linear, _zero_numerical, _zero_analytical):
        found = rule(c, tol, ctx)
        if found is not None:
            return found
    best = _tightest(c, tol, ctx)
    if best is not None:
        return best
    for rule in (boundary, _masked_by_value, index_shift, _masked):
        found = rule(c, tol, ctx)
        if found is not None:
            return found
    return Diagnosis(
        "mismatch",
        f"analytical and numerical gradients of {ctx.output_label} "
        f"w.r.t. {ctx.input_label} disagree with no simple pattern; compare the "
        f"{ctx.code} formula term by term with the forward"
        + (
            " (complex: each factor that multiplies grad_output is conjugated in torch's "
            "convention, e.g. grad_w = grad_y * x.conj() for y = w * x)"
            if any(ctx.complex_sides)
            else ""
        ),
    )


def _tightest(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """Of the patterns that map the whole block (another input's gradient, a transpose, a
    sign, a factor), the first that fits every entry within the check's own tolerance, else
    the one that fits tightest: a 1% factor on a symmetric Jacobian fits `transposed` only
    within FIT, and `constant-factor` exactly."""
    found: list[Fit] = []
    # a missing conjugate first: on an elementwise complex product its (re, im) block is
    # the transpose of the right one, and the conjugate is the mechanism
    for rule in (
        conjugated,
        adjoint,
        _wrong_order,
        transposed,
        operand_transposed,
        _sign_flip,
        _constant_factor,
    ):
        fit = rule(c, tol, ctx)
        if fit is not None and fit[0] <= 1:
            return fit[1]
        found += [fit] if fit is not None else []
    return min(found, key=lambda f: f[0])[1] if found else None


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
    if ctx.stepped:
        return Diagnosis(
            SURROGATE,
            f"{ctx.output_label} is a step function of {ctx.input_label} (every value a whole "
            "number: its numerical derivative is 0 wherever it is defined), and "
            f"{ctx.code} returns a smooth gradient for it: a surrogate gradient or a "
            "straight-through estimator, by design, which finite differences cannot check",
            {"max_analytical": float(c.a.abs().max()) if c.a.numel() else 0.0},
        )
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


def _wrong_order(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    for label, numerical in ctx.others:
        fit = residual_sparse(c.block.analytical, numerical(), tol)
        if explains(fit, c, tol):
            return fit, Diagnosis(
                "wrong-order",
                f"the gradient returned for {ctx.input_label} is the "
                f"gradient of {label}: {ctx.code} returns gradients in the wrong "
                "order (one per forward argument, in forward's order)",
                {"matches": label},
            )
    return None


def _sign_flip(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    fit = residual(c.a, -c.n, tol)
    if not explains(fit, c, tol):
        return None
    return fit, Diagnosis(
        "sign-flip",
        f"the gradient of {ctx.input_label} has the wrong sign "
        f"everywhere: a flipped sign in {ctx.code} (d(-x), d(a - b), -sin vs sin)",
        {"factor": -1.0},
    )


def _constant_factor(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    denom = float((c.n * c.n).sum())
    k = float((c.a * c.n).sum()) / denom if denom > 0 else 0.0
    fit = residual(c.a, k * c.n, tol)
    if abs(k - 1) <= tol.rtol or k == 0 or not explains(fit, c, tol):
        return None
    hint = ""
    for whole in (2, 3, 4, 0.5, 1 / 3, 0.25):
        if abs(k - whole) <= FIT * tol.rtol * abs(whole):
            hint = (
                f" (an extra factor {whole:g})"
                if whole > 1
                else f" (a missing factor {1 / whole:g})"
            )
    return fit, Diagnosis(
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


def _where_shown(
    at: torch.Tensor,
    shape: tuple[int, ...],
    label: str,
    input_label: str,
    values: torch.Tensor | None,
) -> tuple[str, str]:
    """The first three elements where it happens (each input's value where it is known), and
    how many more."""
    name, in_name = label.split(" ")[0], input_label.split(" ")[0]
    shown = ", ".join(
        f"{name}{list(unravel(int(j), shape))}"
        + ("" if values is None else f" ({in_name} = {float(values[k]):.4g})")
        for k, j in enumerate(at[:3].tolist())
    )
    return shown, f" and {at.numel() - 3} more" if at.numel() > 3 else ""


def _not_finite(c: Compared, tol: Tolerance, ctx: Context) -> Diagnosis | None:
    """A NaN/inf numerical derivative: the function is not differentiable (or not defined)
    at the sampled point; a NaN/inf analytical one where the numerical is finite: backward
    divides by zero or takes the log of 0."""
    num_bad, ana_bad = ~torch.isfinite(c.n), ~torch.isfinite(c.a)
    if not bool(num_bad.any() | ana_bad.any()):
        return None
    numerical = bool(num_bad.any())
    rows, cols = positions(c, ctx, num_bad if numerical else ana_bad & ~num_bad)
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
    shown, more = _where_shown(at, shape, label, ctx.input_label, values)
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
