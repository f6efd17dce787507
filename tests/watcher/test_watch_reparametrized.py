"""GS437 for a layer replaced by a reparametrized one (weight_norm, orthogonal) after the
optimizer was built: the replaced module stays alive in a reference cycle (its
parametrized class holds it) when the models are found, so it was read as a second model
whose tensors never learn (GS413) beside new tensors in no optimizer (GS411); it is one
replacement. A whole copy of the model that the loss goes through (an EMA) stays GS411's
copy (test_watch_modgen.py), and the healthy script is silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_reparametrized_layers_built_before_the_optimizer_are_silent():
    report = domain_watched("reparametrized.py", "healthy")
    assert not report.faults, report.internal_error()
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


@pytest.mark.parametrize(
    ("mode", "layer"),
    [
        ("in-place", "4.parametrizations.weight"),
        ("replaced", "Sequential.0"),
        ("replaced-orthogonal", "Sequential.2"),
    ],
)
def test_a_layer_reparametrized_after_the_optimizer_is_one_replacement(mode, layer):
    report = domain_watched("reparametrized.py", mode)
    assert not report.faults, report.internal_error()
    (stale,) = [f for f in report.findings if f.rule == "GS437"]
    assert stale.severity == Severity.ERROR and stale.subject == layer
    rest = [f for f in report.findings if f.rule in ("GS411", "GS413")]
    assert rest and all(f.explained_by == f"GS437:{layer}" for f in rest), rest
