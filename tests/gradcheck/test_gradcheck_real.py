"""gradscope gradcheck on real packages and on each class of issue: the verdict equals
torch.autograd.gradcheck(fast_mode=False) in float64, and the diagnosis fits."""

from __future__ import annotations

import json

import pytest
import torch
import typer
from gradcheck_real_cases import HeldWeight, cases

from gradscope.cli.gradcheck_cmd import gradcheck
from gradscope.examples import functions as ex
from gradscope.gradcheck import check
from gradscope.gradcheck.checker import Options, check_resolved
from gradscope.gradcheck.input_options import InputOptions
from gradscope.gradcheck.targets import resolve_object

CASES = cases()


def _marks(case):
    return [pytest.mark.slow] if case.needs else []


@pytest.mark.parametrize("case", [pytest.param(c, marks=_marks(c), id=c.name) for c in CASES])
def test_verdict_equals_torch_slow_gradcheck_and_diagnosis_fits(case):
    expected = case.torch()
    result = case.gradscope()
    assert result.passed == expected, (result.failures, result.errors)
    assert expected == (case.diagnosis is None)
    assert not result.errors
    assert (
        {f.diagnosis.slug for f in result.failures} <= {case.diagnosis} if case.diagnosis else True
    )
    if case.diagnosis:
        assert case.diagnosis in {f.diagnosis.slug for f in result.failures}
    assert not any(n.slug in ("inplace-saved", "inplace-input") for n in result.notes)


def test_real_packages_are_installed_for_the_suite():
    names = {c.needs for c in CASES if c.needs}
    assert names == {"entmax", "torchdiffeq", "pytorch_wavelets"}, "pip install -e '.[test]'"


def test_module_parameters_are_the_real_tensors_restored_bit_exactly():
    target = resolve_object(HeldWeight(), "held")
    weight = target.obj.weight
    before = weight.detach().clone()
    seen: list[bool] = []
    forward = target.obj.forward

    def spy(x):
        seen.append(target.obj.held[0] is weight)
        return forward(x)

    target.obj.forward = spy
    result = check_resolved(target, Options(InputOptions(shapes={"x": (2, 3)})))
    assert result.passed and all(seen) and len(seen) > 10
    assert target.obj.weight is weight
    assert torch.equal(weight.detach(), before) and weight._version >= 0
    assert [i.name for i in result.inputs] == ["x", "weight"]


def test_a_broken_held_parameter_gradient_is_caught():
    class Broken(HeldWeight):
        def forward(self, x):
            return torch.tanh(x @ self.held[0].detach().T) + 0 * self.held[0].sum()

    result = check(Broken(), shapes={"x": (2, 3)})
    failing = {f.input.name: f.diagnosis.slug for f in result.failures}
    assert failing == {"weight": "zero-grad"}


def test_nested_arguments_are_named_like_the_call():
    a, b = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    named = check(lambda c: c["low"] * c["rest"][0], inputs=({"low": a, "rest": [b]},))
    assert [i.name for i in named.inputs] == ["c['low']", "c['rest'][0]"] and named.passed


def test_not_differentiable_names_the_element_and_suggests_a_domain():
    result = check(ex.SqrtAtZero, tensors={"x": [0.0, 1.0, 4.0]})
    (failure,) = result.failures
    assert failure.diagnosis.slug == "not-differentiable"
    assert failure.diagnosis.details["elements"] == [[0]]
    assert failure.diagnosis.details["suggest"] == "--domain positive"
    assert "out[0] (x = 0)" in failure.diagnosis.message
    assert failure.max_abs_error == failure.max_abs_error  # finite entries only: not NaN


def test_non_finite_analytical_gradient_is_its_own_diagnosis():
    class LogAbsBadGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.abs().log1p()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.sign() / (x.abs() + 1) / (x > -1.0).double().clamp_max(1) * (x / x)

    x = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64, requires_grad=True)
    result = check(LogAbsBadGrad, inputs=(x,))
    assert not torch.autograd.gradcheck(
        LogAbsBadGrad.apply, (x,), fast_mode=False, raise_exception=False
    )
    assert [f.diagnosis.slug for f in result.failures] == ["non-finite-grad"]


def test_boundary_and_index_shift_details():
    (edge,) = check(ex.ReflectSmoothZeroPadGrad).failures
    assert edge.diagnosis.details["dims"] == [1]
    assert set(edge.diagnosis.details["positions"]) <= {0, 1, 2, 3, 12, 13, 14, 15}
    (shift,) = check(ex.CumsumOffByOne).failures
    assert shift.diagnosis.details["shift"] in (1, -1)


def test_a_value_mask_on_a_long_input_stays_masked():
    for seed in range(4):
        for shape in [(16, 16), (64,), (4, 32)]:
            result = check(ex.ELUWrongBranch, shapes={"x": shape}, seed=seed)
            assert {f.diagnosis.slug for f in result.failures} == {"masked"}


def test_a_nested_functions_discarded_save_is_no_warning_but_a_real_one_is():
    assert not check(ex.ExpScaledAfterNestedSave).notes
    assert "inplace-saved" in {n.slug for n in check(ex.ExpSavedThenModified).notes}


def test_trailing_defaults_are_passed_to_apply():
    calls = []

    class Spy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha=1.5, dim=-1):
            calls.append((alpha, dim))
            return x * alpha

        @staticmethod
        def backward(ctx, g):
            return g * 1.5, None, None

    assert check(Spy).passed and set(calls) == {(1.5, -1)}


# the command line


@pytest.fixture
def invoke(runner):
    app = typer.Typer()
    app.command("gradcheck")(gradcheck)

    @app.callback()
    def _root() -> None:
        """A root, so `gradcheck` stays a subcommand."""

    return lambda *args: runner.invoke(app, ["gradcheck", *args], catch_exceptions=False)


NLL = "torch.nn.functional:nll_loss"


def test_cli_states_integer_bool_and_float_tensors_and_domains(invoke):
    assert invoke(NLL, "--shape", "input=3,3", "--tensor", "target=[0,2,1]").exit_code == 0
    assert invoke("SqrtAtZero", "--domain", "positive").exit_code == 0
    assert invoke("SqrtAtZero", "--domain", "x=0.5,2").exit_code == 0
    result = invoke("SqrtAtZero", "--tensor", "x=[0.0,1.0]", "-f", "json")
    assert result.exit_code == 1
    (failure,) = json.loads(result.stdout)["targets"][0]["failures"]
    assert failure["diagnosis"] == "not-differentiable"
    assert invoke("torch:log", "--domain", "unit").exit_code == 0


@pytest.mark.parametrize(
    "args, text",
    [
        (("--arg", "target=[0,2,1]"), "--tensor target=[...]"),
        (("--tensor", "target=[0,[2]]"), "rectangular"),
        (("--tensor", "target='a'"), "not a literal tensor"),
        (("--domain", "x=2,1"), "--domain 'x=2,1'"),
        (("--domain", "sideways"), "positive"),
        (("--domain", "nope=positive"), "has no parameter named `nope`"),
    ],
)
def test_cli_literals_that_do_not_fit_exit_2_with_one_line(invoke, args, text):
    result = invoke(NLL, "--shape", "input=3,3", *args)
    assert result.exit_code == 2, result.output
    assert text in result.output and "Traceback" not in result.output


def test_help_documents_tensor_and_domain(invoke):
    text = invoke("--help").output
    assert "--tensor" in text and "--domain" in text and "target=[0,2,1]" in text
