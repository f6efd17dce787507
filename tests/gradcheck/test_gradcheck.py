"""gradscope.gradcheck against oracles: torch's own Jacobians and torch's slow gradcheck.

Every broken example is checked for its diagnosis, the input it names and the worst
element, whose values are read back from torch.autograd.functional.jacobian of the
broken Function (analytical) and of a correct plain-torch twin (numerical).
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

from gradscope.examples import functions as ex
from gradscope.gradcheck import check
from gradscope.gradcheck.jacobian import Evaluator, tolerance
from gradscope.gradcheck.stages import first_stage


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()


def jac(fn, inputs: tuple, k: int) -> torch.Tensor:
    """d fn(*inputs) / d inputs[k] as an (outputs, inputs[k]) matrix."""
    j = torch.autograd.functional.jacobian(fn, inputs)[k]
    return j.reshape(-1, inputs[k].numel())


def flat(index: tuple[int, ...], shape: tuple[int, ...]) -> int:
    out = 0
    for i, size in zip(index, shape, strict=False):
        out = out * size + i
    return out


# name, correct twin, inputs, failing input position, expected diagnosis
BROKEN = [
    ("SquareMissingFactor", lambda x: x * x, 1, 0, "constant-factor"),
    ("SinWrongSign", lambda x: torch.sin(x), 1, 0, "sign-flip"),
    ("MulNoneGrad", lambda x, w: x * w, 2, 1, "none-grad"),
    ("detached_tanh", lambda x: torch.tanh(x) * 2, 1, 0, "zero-grad"),
    ("MulSwappedGrads", lambda x, y: x * y, 2, 0, "wrong-order"),
    ("MatMulTransposedGrad", lambda a, b: a @ b, 2, 1, "transposed"),
    ("ELUWrongBranch", lambda x: F.elu(x), 1, 0, "masked"),
    ("ScaleIgnoresGradOutput", lambda x: 3 * x, 1, 0, "not-scaled-by-grad-output"),
]


def _apply(target):
    return target.apply if isinstance(target, type) else target


@pytest.mark.parametrize("name, twin, n_inputs, position, slug", BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_function_is_caught_with_its_diagnosis_input_and_worst_element(
    name, twin, n_inputs, position, slug
):
    target = getattr(ex, name)
    inputs = tuple(randn(4, 4, seed=k) for k in range(n_inputs))
    result = check(target, inputs=inputs)
    assert not result.passed
    failure = next(f for f in result.failures if f.input.position == position)
    assert failure.diagnosis.slug == slug
    assert failure.input.name == list(inspect.signature(twin).parameters)[position]

    analytical = jac(_apply(target), inputs, position)
    numerical = jac(twin, inputs, position)
    gap = (analytical - numerical).abs()
    top = failure.worst[0]
    r, c = flat(top.output_index, (4, 4)), flat(top.input_index, (4, 4))
    assert top.analytical == pytest.approx(float(analytical[r, c]), abs=1e-9)
    assert top.numerical == pytest.approx(float(numerical[r, c]), abs=1e-5)
    assert top.error == pytest.approx(float(gap.max()), rel=1e-4, abs=1e-6)
    assert failure.max_abs_error == pytest.approx(float(gap.max()), rel=1e-4, abs=1e-6)


def test_only_the_broken_input_is_reported():
    result = check(ex.MulNoneGrad, inputs=(randn(4, 4), randn(4, 4, seed=1)))
    assert [f.input.name for f in result.failures] == ["w"]
    result = check(ex.MatMulTransposedGrad, inputs=(randn(4, 4), randn(4, 4, seed=1)))
    assert [f.input.name for f in result.failures] == ["b"]


def test_diagnosis_details_carry_the_numbers():
    x = randn(4, 4)
    factor = check(ex.SquareMissingFactor, inputs=(x,)).failures[0].diagnosis
    assert factor.details["factor"] == pytest.approx(0.5, rel=1e-6)
    assert "missing factor 2" in factor.message
    swapped = check(ex.MulSwappedGrads, inputs=(x, randn(4, 4, seed=1))).failures
    assert swapped[0].diagnosis.details["matches"] == "y (arg 1)"
    assert swapped[1].diagnosis.details["matches"] == "x (arg 0)"


def test_masked_diagnosis_names_the_input_range_of_the_branch():
    x = randn(4, 4)
    assert bool(((x > 0) & (x <= 1)).any()) and bool((x > 1).any())
    diag = check(ex.ELUWrongBranch, inputs=(x,)).failures[0].diagnosis
    lo, hi = diag.details["range"]
    wrong = x.detach()[(x > 0) & (x <= 1)]
    assert lo == pytest.approx(float(wrong.min())) and hi == pytest.approx(float(wrong.max()))
    assert diag.details["mismatched"] == wrong.numel()


def test_tutorial_custom_relu_passes_first_and_second_order():
    result = check(ex.CustomReLU, second_order=True)
    assert result.passed, result.failures
    assert [c.name for c in result.checks] == ["backward", "second-order"]
    assert result.inputs[0].name == "input" and result.inputs[0].shape == (4, 4)


def test_awkward_real_world_signature_passes():
    """Non-tensors between tensors, a bool mask, an int index, three outputs, classmethods."""
    result = check(ex.MaskedScaleSum, second_order=True)
    assert result.passed, (result.failures, result.errors)
    assert [(i.name, i.position) for i in result.inputs] == [("x", 0), ("w", 3)]
    assert result.outputs == ("out[0]", "out[1]")
    x, dim, mask, w, options, _, _, index = ex.MaskedScaleSum.gradcheck_inputs()
    mean = check(ex.MaskedScaleSum, inputs=(x, dim, mask, w, options, "mean", None, index))
    assert mean.passed, mean.failures


def test_same_verdicts_as_torch_slow_gradcheck():
    from torch.nn.modules._functions import CrossMapLRN2d

    cases = [
        (ex.CustomReLU.apply, (randn(4, 4),)),
        (ex.SquareMissingFactor.apply, (randn(4, 4),)),
        (ex.ELUWrongBranch.apply, (randn(4, 4),)),
        (ex.MulSwappedGrads.apply, (randn(3, 3), randn(3, 3, seed=1))),
        (lambda x: CrossMapLRN2d.apply(x, 3), (randn(2, 3, 3, 3),)),
        (F.softplus, (randn(5, 3),)),
    ]
    for fn, inputs in cases:
        expected = torch.autograd.gradcheck(fn, inputs, fast_mode=False, raise_exception=False)
        assert check(fn, inputs=inputs).passed == expected, fn


def test_torch_functions_pass_as_plain_functions():
    assert check(F.gelu).passed  # a builtin: signature read from its docstring
    assert check(F.mse_loss).passed
    assert check(F.layer_norm, args={"normalized_shape": [4]}).passed
    assert check(torch.tanh).passed


def test_torch_autograd_functions_pass():
    from torch.autograd._functions.tensor import Resize
    from torch.utils.checkpoint import CheckpointFunction

    # reentrant checkpointing refuses torch.autograd.grad; gradscope falls back to backward()
    result = check(CheckpointFunction, inputs=(torch.tanh, True, randn(3, 4)))
    assert result.passed, result.errors
    assert result.inputs[0].name == "args[0]" and result.inputs[0].position == 2
    assert check(Resize, args={"sizes": [8, 2]}).passed


def test_new_style_function_with_setup_context():
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.k, None

    result = check(Scale, args={"k": 3.0})
    assert result.passed and [i.name for i in result.inputs] == ["x"]


def test_module_parameters_are_inputs_and_the_users_module_is_untouched():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self, x):
            return self.lin(x) * ex.SquareMissingFactor.apply(self.w)

    net = Net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    result = check(net)
    assert {(f.input.name, f.input.kind) for f in result.failures} == {("w", "parameter")}
    assert [i.name for i in result.inputs] == ["x", *(n for n, _ in net.named_parameters())]
    assert net.training and all(
        p.grad is None and p.dtype == torch.float32 for p in net.parameters()
    )
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_module_factory_passes():
    def factory():
        return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())

    result = check(factory)
    assert result.passed and result.kind == "module"


def _line_of(obj, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(k for k, line in enumerate(lines) if text in line)


def test_backward_that_raises_is_a_failure_with_the_users_line():
    result = check(ex.BackwardRaises)
    (error,) = result.errors
    assert not result.passed and error.stage == "backward"
    line = _line_of(ex.BackwardRaises, "x, y = ctx.saved_tensors")
    assert error.location.endswith(f"functions.py:{line}")
    assert "ValueError" in error.message


def test_wrong_number_of_gradients_names_what_backward_must_return():
    (error,) = check(ex.PowerTooFewGrads).errors
    assert error.diagnosis.slug == "wrong-grad-count"
    assert "(grad_x, None (for power))" in error.diagnosis.message
    line = _line_of(ex.PowerTooFewGrads, "def backward")
    assert error.location.endswith(f"functions.py:{line}")


def test_forward_ad_runs_when_the_function_defines_jvp():
    good = check(ex.SinWithJvp)
    assert good.passed and [c.name for c in good.checks] == ["backward", "forward-ad"]
    bad = check(ex.SinWrongJvp)
    assert [(f.check, f.diagnosis.slug) for f in bad.failures] == [("forward-ad", "sign-flip")]
    assert "jvp" in bad.failures[0].diagnosis.message
    missing = check(ex.CustomReLU, forward_ad=True)
    assert [e.diagnosis.slug for e in missing.errors] == ["no-jvp"]


def test_second_order_catches_a_detached_backward_and_once_differentiable():
    detached = check(ex.SquareDetachedBackward, second_order=True)
    assert [c.passed for c in detached.checks] == [True, False]
    assert {f.diagnosis.slug for f in detached.failures} == {"zero-grad"}
    once = check(ex.SquareOnceDifferentiable, second_order=True)
    assert [e.diagnosis.slug for e in once.errors] == ["not-twice-differentiable"]
    assert check(ex.SquareDetachedBackward).passed  # first order alone is right


def test_warnings():
    low = check(ex.CustomReLU, dtype="float32")
    assert low.passed and [n.slug for n in low.notes] == ["low-precision"]
    assert low.tolerance["atol"] > 1e-5
    saved = check(ex.ExpSavedThenModified)
    assert "inplace-saved" in [n.slug for n in saved.notes] and not saved.passed
    assert "output-no-grad" in [n.slug for n in check(ex.detached_tanh).notes]

    class ReluNoClone(ex.CustomReLU):
        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            grad_output[input < 0] = 0
            return grad_output

    class AddsInPlace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    assert "inplace-grad-output" in [n.slug for n in check(ReluNoClone).notes]
    assert "inplace-input" in [n.slug for n in check(AddsInPlace).notes]


def test_seed_makes_inputs_reproducible():
    a = check(ex.SquareMissingFactor, seed=3).failures[0]
    b = check(ex.SquareMissingFactor, seed=3).failures[0]
    c = check(ex.SquareMissingFactor, seed=4).failures[0]
    assert a.worst == b.worst and a.worst != c.worst


class OffByOnePercent(ex.CustomReLU):
    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad = grad_output.clone() * 1.01
        grad[input < 0] = 0
        return grad


class ClampLeaksAboveBound(torch.autograd.Function):
    """clamp(x, -2.5, 2.5) whose backward lets 0.1% of the gradient through above 2.5: an
    error of 0.001 on ~0.5% of the elements, too small for random projections alone."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-2.5, 2.5)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inside = ((x >= -2.5) & (x <= 2.5)).to(grad.dtype)
        return grad * torch.where(x > 2.5, 0.001, inside)


class WrongWhereMasked(torch.autograd.Function):
    """2x, but backward returns 2.2 grad on a fixed random 3% of the elements, a pattern no
    value-based sample can aim at: the random directions find it."""

    mask = torch.rand(3000, generator=torch.Generator().manual_seed(2)) < 0.03

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return grad * torch.where(WrongWhereMasked.mask, 2.2, 2.0)


@pytest.mark.parametrize(
    "target, broken",
    [
        (ex.CustomReLU, False),
        (OffByOnePercent, True),
        (ClampLeaksAboveBound, True),
        (WrongWhereMasked, True),
    ],
)
def test_sampled_stage_keeps_slow_mode_sensitivity_on_3000_elements(target, broken):
    x = randn(3000, seed=1)
    assert bool((x > 2.5).any())
    ev = Evaluator(lambda t: [target.apply(t)], [x.detach()], tolerance([x.dtype]))
    stage = first_stage(ev, torch.Generator().manual_seed(1), "backward")
    assert bool(stage.failing()) == broken
    assert ev.calls < 150  # slow mode needs 3 * 3000


def test_a_one_percent_factor_on_3000_elements_is_located_at_full_resolution():
    (failure,) = check(OffByOnePercent, inputs=(randn(3000),)).failures
    assert failure.diagnosis.slug == "constant-factor" and failure.resolution == "full"
    assert failure.diagnosis.details["factor"] == pytest.approx(1.01, rel=1e-6)
