"""Custom Functions on complex tensors: checked as (re, im) pairs like torch's own gradcheck,
and a backward that forgets the conjugate (torch's convention: the conjugate Wirtinger
derivative) named by that mechanism, not as a transpose or a plain mismatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import typer
from complex_functions import (
    ComplexMul,
    ComplexMulFactor,
    ComplexMulNoConj,
    FFTConv,
    FFTConvNoConj,
    Power,
    PowerConj,
    SpectralMix,
    SpectralMixNoConj,
)

from gradscope.cli.gradcheck_cmd import gradcheck
from gradscope.gradcheck import check

HERE = Path(__file__).parent


def cx(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.complex128).requires_grad_()


CASES = {
    "mul": (ComplexMul, ComplexMulNoConj, lambda: (cx(3, 4), cx(3, 4, seed=1))),
    "spectral": (SpectralMix, SpectralMixNoConj, lambda: (cx(2, 3, 4), cx(3, 3, 4, seed=1))),
    "power": (Power, PowerConj, lambda: (cx(3, 4),)),
    "fft": (FFTConv, FFTConvNoConj, lambda: (cx(2, 6), cx(6, seed=1))),
}


def slugs(result) -> dict[str, str]:
    return {f.input.name: f.diagnosis.slug for f in result.failures}


@pytest.mark.parametrize("case", CASES)
def test_a_right_complex_backward_passes_as_torchs_gradcheck_says(case):
    good, _, inputs = CASES[case]
    assert torch.autograd.gradcheck(good.apply, inputs())
    result = check(good, inputs=inputs())
    assert result.passed, slugs(result)
    assert not result.notes  # complex128 is the full precision: no low-precision caveat


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("mul", {"z": "missing-conjugate", "w": "missing-conjugate"}),
        ("spectral", {"x": "missing-conjugate", "w": "missing-conjugate"}),
        ("power", {"z": "missing-conjugate"}),  # a real output of a complex input
        # the filter's h applied where h.conj() is due: the adjoint; X for conj(X) in h's
        # gradient is no whole-map conjugate (the bins come back reversed): a mismatch
        ("fft", {"x": "missing-conjugate", "h": "mismatch"}),
    ],
)
def test_a_forgotten_conjugate_is_named_by_its_mechanism(case, named):
    _, bad, inputs = CASES[case]
    assert not torch.autograd.gradcheck(bad.apply, inputs(), raise_exception=False)
    result = check(bad, inputs=inputs())
    assert not result.passed and slugs(result) == named
    for failure in result.failures:
        text = failure.diagnosis.message
        assert "conj" in text  # the advice names the conjugate either way


def test_a_wrong_factor_on_complex_inputs_is_a_factor_not_a_conjugate():
    result = check(ComplexMulFactor, inputs=(cx(3, 4), cx(3, 4, seed=1)))
    (failure,) = result.failures
    assert failure.input.name == "z" and failure.diagnosis.slug == "constant-factor"
    assert failure.diagnosis.details["factor"] == pytest.approx(2.0, rel=1e-3)


def test_generated_complex_inputs_have_both_parts_drawn():
    """--dtype complex128 draws real and imaginary parts: with real-valued draws conj(w) = w
    and the missing conjugate would pass."""
    result = check(SpectralMixNoConj, shapes={"x": (2, 3, 4), "w": (3, 3, 4)}, dtype="complex128")
    assert slugs(result) == {"x": "missing-conjugate", "w": "missing-conjugate"}
    assert [i.dtype for i in result.inputs] == ["complex128", "complex128"]
    low = check(ComplexMul, dtype="complex64")
    assert low.passed and [n.slug for n in low.notes] == ["low-precision"]


def test_the_command_checks_complex_dtypes(runner, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    app = typer.Typer()
    app.command("gradcheck")(gradcheck)
    app.callback()(lambda: None)
    spec = f"{HERE / 'complex_functions.py'}:ComplexMulNoConj"
    result = runner.invoke(app, ["gradcheck", spec, "--dtype", "cdouble", "-f", "json"])
    assert result.exit_code == 1, result.output
    (target,) = json.loads(result.stdout)["targets"]
    assert {f["diagnosis"] for f in target["failures"]} == {"missing-conjugate"}
    good = runner.invoke(app, ["gradcheck", spec.replace("NoConj", ""), "--dtype", "complex64"])
    assert good.exit_code == 0, good.output
