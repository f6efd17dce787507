"""GS411's advice for a parameter left out of param groups split by hand: its own layer (or
the one holding it) has parameters the optimizer steps, so it is no target, EMA or teacher
copy; the advice names that layer and says to add it to a group (an S4 kernel's A and dt, a
Mamba block's A_log, left out when the groups were built by name). A module of its own with
nothing stepped (a teacher beside a student) keeps the advice that covers copies first."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from gradscope.steps.records import ParamInfo
from tests.rules.test_rules_objectives import MSE, found, rec, run_of


def _stepped(name: str) -> ParamInfo:
    return ParamInfo(name, (8, 4), True, True, 1e-3)


def _left_out(name: str) -> ParamInfo:
    return ParamInfo(name, (8, 4), True, False, None)


def _advice(*params: ParamInfo) -> str:
    norms = [(1.0, 1.0, 0.5 + 0.01 * (s % 3)) for s in range(1, 60)]
    recs = [rec(s, 1.0, param_norms=n) for s, n in enumerate(norms, 1)]
    (f,) = found(run_of(recs, MSE, params=params, members=((0, 1),)))["GS411"]
    assert f.severity == Severity.ERROR
    return f.advice


@pytest.mark.parametrize(
    ("stepped", "left_out", "layer"),
    [
        (("s4.0.D", "s4.0.out.weight"), "s4.0.kernel.log_dt", "s4.0"),
        (("layers.0.in_proj.weight", "layers.0.D"), "layers.0.A_log", "layers.0"),
    ],
    ids=["s4-kernel", "mamba-A_log"],
)
def test_a_parameter_of_a_trained_layer_is_told_to_join_a_param_group(stepped, left_out, layer):
    advice = _advice(*map(_stepped, stepped), _left_out(left_out))
    assert advice.startswith(f"{layer}, which holds it, has parameters the optimizer steps")
    assert "add it to a param group" in advice
    assert "teacher" not in advice


def test_a_teacher_beside_its_student_keeps_the_advice_for_copies():
    advice = _advice(
        _stepped("kd.student.fc.weight"),
        _stepped("kd.student.out.weight"),
        _left_out("kd.teacher.fc.weight"),
    )
    assert "if it is a target, EMA or teacher copy" in advice
    assert "which holds it" not in advice


def test_a_parameter_of_the_model_itself_is_told_to_join_a_param_group():
    """A CRF tagger's transitions sit on the model itself (a run's only model names its
    parameters without a prefix): the model holds parameters the optimizer steps."""
    advice = _advice(
        _stepped("emb.weight"), _stepped("hidden2tag.weight"), _left_out("transitions")
    )
    assert advice.startswith("the model, which holds it, has parameters the optimizer steps")
    assert "teacher" not in advice


def test_a_bare_tensor_beside_the_model_keeps_the_advice_for_copies():
    bare = ParamInfo("temperature", (8, 4), True, False, None, in_model=False)
    advice = _advice(_stepped("emb.weight"), _stepped("hidden2tag.weight"), bare)
    assert "if it is a target, EMA or teacher copy" in advice
    assert "which holds it" not in advice
