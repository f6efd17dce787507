"""A complex backward that forgot a conjugate, named from the real Jacobian it gave.

torch's gradient w.r.t. a complex z is the conjugate Wirtinger derivative: for y = w z,
grad_z = grad_y · conj(w). A backward that returns grad_y · w gives, for every cotangent
v, conj(the right gradient for conj(v)); in the (re, im) pairs the check compares
(complex_view) that is the numerical Jacobian with the sign flipped on every entry that
pairs a real part with an imaginary one.
"""

from __future__ import annotations

import torch

from gradscope.gradcheck.compared import Compared, Context, Fit, explains, positions, residual
from gradscope.gradcheck.complex_view import conjugation_signs
from gradscope.gradcheck.diagnose_shapes import operand_transposed
from gradscope.gradcheck.jacobian import Tolerance
from gradscope.gradcheck.results import Diagnosis


def conjugated(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    """`missing-conjugate`: analytical = the numerical Jacobian of the conjugated function."""
    out_complex, in_complex = ctx.complex_sides
    if not (out_complex or in_complex) or not c.a.numel():
        return None
    rows, cols = positions(c, ctx, torch.ones_like(c.bad))
    fit = residual(c.a, conjugation_signs(rows, cols, out_complex, in_complex) * c.n, tol)
    if not explains(fit, c, tol):
        return None
    return fit, Diagnosis(
        "missing-conjugate",
        f"the gradient of {ctx.input_label} is the conjugate of the right one (analytical = "
        f"numerical with {_sides(out_complex, in_complex)} conjugated): {ctx.code} multiplies "
        "grad_output by a derivative where torch's convention wants its conjugate "
        "(the conjugate Wirtinger derivative: for y = w * z, grad_z = grad_y * w.conj()); "
        "conjugate the factor that multiplies grad_output (an element's last index is 0 for "
        "the real part, 1 for the imaginary one)",
        {"conjugated": [s for s, on in (("output", out_complex), ("input", in_complex)) if on]},
    )


def adjoint(c: Compared, tol: Tolerance, ctx: Context) -> Fit | None:
    """`missing-conjugate` too where the complex sides' (re, im) Jacobian is the numerical one
    transposed: the real transpose of a complex map is its conjugate transpose, so backward
    applied the forward's own map (an FFT filter's h) where its adjoint (h.conj()) is due."""
    if not any(ctx.complex_sides):
        return None
    found = operand_transposed(c, tol, ctx)
    if found is None:
        return None
    return found[0], Diagnosis(
        "missing-conjugate",
        f"the gradient of {ctx.input_label} applies the forward's own linear map where its "
        "adjoint (conjugate transpose) is due (analytical = numerical Jacobian transposed, "
        f"in (re, im) pairs): {ctx.code} multiplies grad_output by a factor that torch's "
        "convention wants conjugated (an FFT filter's h for h.conj(), w for w.conj()) or, "
        "for a matrix, transposed as well (b.mH, not b.conj())",
        {"conjugated": ["adjoint"]},
    )


def _sides(out_complex: bool, in_complex: bool) -> str:
    if out_complex and in_complex:
        return "input and output"
    return "the output" if out_complex else "the input"
