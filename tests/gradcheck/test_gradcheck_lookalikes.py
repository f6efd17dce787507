"""Each named gradcheck diagnosis against its look-alikes: a missing .t() on one operand,
a permuted axis, a broadcast summed over the wrong axis. Each gets its own name or the
plain mismatch, never "masked/branch error" (those functions have no branch)."""

from __future__ import annotations

import pytest
import torch

from gradscope.examples import functions as ex
from gradscope.gradcheck import check


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()


class ScaledMatMul(torch.autograd.Function):
    """a @ b * s; backward forgets .t() on b for a's gradient: g @ b * s."""

    @staticmethod
    def forward(ctx, a, b, s):
        ctx.save_for_backward(a, b)
        ctx.s = s
        return a @ b * s

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b * ctx.s, a.t() @ g * ctx.s, None


class PermutedAxis(torch.autograd.Function):
    """x * c; the gradient comes back with dims 0 and 2 swapped (a wrong permute)."""

    @staticmethod
    def forward(ctx, x, c):
        ctx.save_for_backward(c)
        return x * c

    @staticmethod
    def backward(ctx, g):
        (c,) = ctx.saved_tensors
        return (g * c).permute(2, 1, 0), None


class BroadcastWrongAxis(torch.autograd.Function):
    """x + b, b broadcast over rows; b's gradient sums over the wrong axis."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, g):
        return g, g.sum(1)


def diagnosis(fn, inputs, name):
    result = check(fn, inputs=inputs)
    assert not result.passed
    (failure,) = [f for f in result.failures if f.input.name == name]
    return failure.diagnosis


def test_a_missing_t_on_one_operand_is_transposed_not_masked():
    for a_shape in ((4, 4), (3, 4)):  # square or not, b is (4, 4)
        diag = diagnosis(ScaledMatMul, (randn(*a_shape), randn(4, 4, seed=1), 0.5), "a")
        assert diag.slug == "transposed" and diag.details == {"side": "operand"}
        assert "g @ b.t()" in diag.message and "mask" not in diag.message


def test_a_permuted_axis_names_the_dims():
    c = torch.randn(2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    diag = diagnosis(PermutedAxis, (randn(2, 3, 2), c), "x")
    assert diag.slug == "transposed" and diag.details["dims"] == [0, 2]
    assert "dimensions 0 and 2 swapped" in diag.message


class ScaledWrongFormula(torch.autograd.Function):
    """x * 2; backward scales the odd columns by 3 instead: no value condition, no zeros."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        out = g * 2
        out[:, 1::2] *= 3
        return out


def test_a_broadcast_summed_over_the_wrong_axis_is_named_so():
    diag = diagnosis(BroadcastWrongAxis, (randn(3, 3), randn(3, seed=1)), "b")
    assert diag.slug == "broadcast-axis" and "summed over the wrong dimension" in diag.message
    assert "mask" not in diag.message


def test_a_different_formula_with_no_mask_is_a_plain_mismatch():
    diag = diagnosis(ScaledWrongFormula, (randn(4, 4),), "x")
    assert diag.slug == "mismatch" and "mask" not in diag.message


def test_the_named_patterns_still_fire_on_their_own_cases():
    x = randn(4, 4)
    assert diagnosis(ex.ELUWrongBranch, (x,), "x").slug == "masked"  # a real branch
    both = (randn(4, 4), randn(4, 4, seed=1))
    assert diagnosis(ex.MatMulTransposedGrad, both, "b").details == {"side": "input"}


class SparsemaxScaled(torch.autograd.Function):
    """entmax's sparsemax; backward is the true one times `factor` (a symmetric Jacobian)."""

    factor = 1.01

    @staticmethod
    def forward(ctx, x):
        from entmax import sparsemax

        y = sparsemax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        support = (y > 0).to(g.dtype)
        mean = (g * support).sum(-1, keepdim=True) / support.sum(-1, keepdim=True)
        return SparsemaxScaled.factor * support * (g - mean)


def test_a_one_percent_factor_on_a_real_sparsemax_is_a_constant_factor_not_transposed():
    # every analytical entry 0.6733 against 0.6667: a transpose of a symmetric Jacobian
    # fits that only loosely (1%, within 10x the tolerance), the factor 1.01 exactly
    diag = diagnosis(SparsemaxScaled, (randn(4, 4),), "x")
    assert diag.slug == "constant-factor", diag
    assert abs(diag.details["factor"] - 1.01) < 1e-6


def _symmetric(n: int) -> torch.Tensor:
    s = torch.randn(n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    return s + s.t()


class SymmetricMatMul(torch.autograd.Function):
    """x @ S with S symmetric: J = I ⊗ S, its own transpose; backward times `factor`."""

    factor = 1.0

    @staticmethod
    def forward(ctx, x):
        return x @ _symmetric(x.shape[-1])

    @staticmethod
    def backward(ctx, g):
        return SymmetricMatMul.factor * (g @ _symmetric(g.shape[-1]))


class CubeScaled(torch.autograd.Function):
    """x ** 3: a diagonal Jacobian (symmetric too); backward times `factor`."""

    factor = 1.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return CubeScaled.factor * 3 * x * x * g


@pytest.mark.parametrize("fn", [SymmetricMatMul, CubeScaled, SparsemaxScaled])
@pytest.mark.parametrize(
    "factor, slug",
    [
        (1.01, "constant-factor"),
        (0.99, "constant-factor"),
        (2.0, "constant-factor"),
        (-1.0, "sign-flip"),
        (-1.01, "constant-factor"),
    ],
)
def test_a_symmetric_jacobian_is_never_called_transposed(fn, factor, slug, monkeypatch):
    monkeypatch.setattr(fn, "factor", factor)
    diag = diagnosis(fn, (randn(4, 4, seed=2),), "x")
    assert diag.slug == slug, diag
    assert diag.details["factor"] == pytest.approx(factor, abs=1e-6)


class CubeHalfOff(torch.autograd.Function):
    """x ** 3; backward 1% too large on the even elements only: no single factor, no
    transpose (the Jacobian is diagonal, its own transpose)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        scale = torch.ones_like(x).reshape(-1)
        scale[::2] = 1.01
        return 3 * x * x * g * scale.reshape(x.shape)


def test_an_uneven_small_error_on_a_diagonal_jacobian_is_not_transposed():
    diag = diagnosis(CubeHalfOff, (randn(4, 4),), "x")
    assert diag.slug != "transposed", diag
