"""Made-up inputs (no gradcheck_inputs, --shape or --arg) never fail a correct Function:
names say what they can (a bias, a scale, a dim), backward's gradient shape says the rest,
and a failure a made-up input explains is "could not check" with the flag to pass."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import TargetError
from gradscope.gradcheck import check
from gradscope.gradcheck.guesses import guess


class ScaledMatMul(torch.autograd.Function):
    """(x @ weight.T + bias) * scale, scale a float kept on ctx: correct."""

    @staticmethod
    def forward(ctx, x, weight, bias, scale):
        ctx.save_for_backward(x, weight)
        ctx.scale = scale
        return (x @ weight.T + bias) * scale

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g * ctx.scale
        return g @ weight, g.t() @ x, g.sum(0), None


class ScaledMatMulShift(torch.autograd.Function):
    """The same with names no guess reads: `shift` (a vector) and `gain` (a float)."""

    @staticmethod
    def forward(ctx, x, weight, shift, gain):
        ctx.save_for_backward(x, weight)
        ctx.gain = gain
        return (x @ weight.T + shift) * gain

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g * ctx.gain
        return g @ weight, g.t() @ x, g.sum(0), None


class ScaledMatMulMissingScale(ScaledMatMul):
    """x's gradient forgets the scale: a real bug, made-up inputs or not."""

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        return g @ weight, (g * ctx.scale).t() @ x, (g * ctx.scale).sum(0), None


class ScaledMatMulBiasWrongAxis(ScaledMatMul):
    """bias's gradient summed over the wrong axis (right shape, wrong values)."""

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g * ctx.scale
        return g @ weight, g.t() @ x, g.sum(1), None


def unchecked(result):
    return {n.subject: n.message for n in result.notes if n.slug == "made-up-input"}


def test_a_correct_scaled_matmul_passes_on_made_up_inputs():
    result = check(ScaledMatMul)
    assert result.passed and not result.failures and not result.errors, result
    shapes = {i.name: i.shape for i in result.inputs}
    assert shapes == {"x": (4, 4), "weight": (4, 4), "bias": (4,), "scale": ()}
    coverage = {i.name: i.coverage for i in result.inputs}
    assert coverage["scale"] == "its one element" and coverage["bias"] == "all 4 elements"
    (message,) = unchecked(result).values()
    assert message.startswith("could not check scale (arg 3) with made-up inputs")
    assert "--arg scale=VALUE" in message


def test_names_no_guess_reads_are_refit_from_backward_and_set_aside():
    # shift made up 4x4: backward returns a gradient of shape [4] (torch refuses it) ->
    # checked again as 4; gain made up 4x4: backward returns None -> could not check
    result = check(ScaledMatMulShift)
    assert result.passed and not result.failures and not result.errors, result
    assert {i.name: i.shape for i in result.inputs}["shift"] == (4,)
    notes = unchecked(result)
    assert set(notes) == {"gain"}  # shift was checked, as 4
    assert "--arg gain=VALUE" in notes["gain"] and "could not check gain" in notes["gain"]
    (refit,) = [n for n in result.notes if n.slug == "made-up-shape"]
    assert refit.subject == "shift" and "made up as 4×4" in refit.message
    assert "--shape shift=DIMS" in refit.message and "--shape shift=4 " in refit.message


@pytest.mark.parametrize(
    "fn, broken, slug",
    [
        (ScaledMatMulMissingScale, "x", "constant-factor"),
        (ScaledMatMulBiasWrongAxis, "bias", None),
    ],
)
def test_a_real_bug_still_fails_beside_a_made_up_input(fn, broken, slug):
    result = check(fn)
    assert not result.passed
    failed = {f.input.name: f.diagnosis.slug for f in result.failures}
    assert set(failed) == {broken}, failed
    assert slug is None or failed[broken] == slug
    assert "scale" in unchecked(result)  # still set aside, not blamed


def test_a_stated_input_is_never_set_aside():
    # --shape scale= (a tensor, the user says): backward returning None is the Function's bug
    result = check(ScaledMatMul, shapes={"scale": ()})
    assert not result.passed
    assert [(f.input.name, f.diagnosis.slug) for f in result.failures] == [("scale", "none-grad")]
    assert not unchecked(result)
    given = (torch.randn(4, 4, dtype=torch.float64, requires_grad=True),) * 2
    given += (torch.randn(4, dtype=torch.float64, requires_grad=True),)
    given += (torch.tensor(0.5, dtype=torch.float64, requires_grad=True),)
    assert not check(ScaledMatMul, inputs=given).passed  # gradcheck_inputs' tensors too
    assert check(ScaledMatMul, args={"scale": 0.5}).passed  # a number: nothing set aside
    assert not unchecked(check(ScaledMatMul, args={"scale": 0.5}))


class MatrixOnly(torch.autograd.Function):
    """w must be a matrix; backward returns a vector for it (a bug, or a vector w?)."""

    @staticmethod
    def forward(ctx, x, w):
        if w.dim() != 2:
            raise ValueError("w must be a matrix")
        ctx.save_for_backward(x)
        return x * w.sum()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g, (g * x).sum(0)


def test_a_shape_the_forward_refuses_again_is_could_not_check_exit_2():
    with pytest.raises(TargetError) as caught:
        check(MatrixOnly)
    text = str(caught.value)
    assert text.startswith("could not check MatrixOnly with made-up inputs")
    assert "`w` (made up as 4×4)" in text and "--shape w=DIMS" in text
    assert "w must be a matrix" in text and caught.value.exit_code == 2


def test_guesses_from_names():
    assert guess("bias", (4, 4)).shape == (4,) and guess("out_bias", (4, 4)).shape == (4,)
    assert guess("eps", (4, 4)).shape == () and guess("scale", (4, 4)).domain is not None
    assert guess("dim", (4, 4)).value == -1 and guess("dim", (4, 4)).shape is None
    assert guess("x", (4, 4)).shape == (4, 4) and guess("b", (4, 4)).shape == (4, 4)


def test_a_dim_is_made_up_as_the_last_axis_not_a_tensor():
    def normalized(x, dim, eps):
        return x / (x.norm(dim=dim, keepdim=True) + eps)

    result = check(normalized)
    assert result.passed, result
    assert [(i.name, i.shape) for i in result.inputs] == [("x", (4, 4)), ("eps", ())]


USER_FILE = """
import torch


class ScaledMatMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, scale):
        ctx.save_for_backward(x, weight)
        ctx.scale = scale
        return (x @ weight.T + bias) * scale

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g * ctx.scale
        return g @ weight, g.t() @ x, g.sum(0), None


class MatrixOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        if w.dim() != 2:
            raise ValueError("w must be a matrix")
        ctx.save_for_backward(x)
        return x * w.sum()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g, (g * x).sum(0)
"""


def test_the_command_says_could_not_check_and_exits_0_or_2(runner, tmp_path, monkeypatch):
    from gradscope.cli.root import app

    (tmp_path / "userfns.py").write_text(USER_FILE)
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["gradcheck", "userfns.py:ScaledMatMul"], catch_exceptions=False)
    assert done.exit_code == 0, done.stdout
    assert "could not check scale (arg 3) with made-up inputs" in done.stdout
    assert "FAIL" not in done.stdout
    args = ["gradcheck", "userfns.py:ScaledMatMul", "--arg", "scale=0.5"]
    done = runner.invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 0 and "made-up" not in done.stdout
    done = runner.invoke(app, ["gradcheck", "userfns.py:MatrixOnly"], catch_exceptions=False)
    assert done.exit_code == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "could not check userfns.py:MatrixOnly with made-up inputs" in line
    assert "Traceback" not in done.stderr
