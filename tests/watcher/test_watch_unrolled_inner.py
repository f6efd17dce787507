"""Unrolled inner optimisation (tests/watcher/domain_scripts/unrolled_inner.py): a
hyper-parameter or synthetic input that reaches the outer loss only through an inner
derivative taken without create_graph is named by that cause (GS413), a parameter the loop
never reads keeps the plain advice, and healthy unrolls (create_graph, first-order MAML)
stay clean."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "unrolled_inner.py"


def _loud(run) -> list[str]:
    return [f"{f.rule} {f.subject}" for f in run.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("mode", ["bilevel", "distill", "fomaml"])
def test_healthy_unrolls_raise_nothing(mode):
    assert _loud(domain_watched(SCRIPT, mode)) == []


@pytest.mark.parametrize(
    ("mode", "subject"), [("bilevel-plain", "param0"), ("distill-plain", "param0")]
)
def test_an_inner_derivative_without_create_graph_is_named(mode, subject):
    (f,) = [f for f in domain_watched(SCRIPT, mode).findings if f.rule == "GS413"]
    assert f.subject.endswith(subject) and f.severity is Severity.WARNING
    assert "differentiated by torch.autograd.grad without create_graph" in f.message
    assert f.advice.startswith("pass create_graph=True")


def test_a_hyper_parameter_the_loop_never_reads_keeps_the_plain_advice():
    (f,) = [f for f in domain_watched(SCRIPT, "bilevel-unused").findings if f.rule == "GS413"]
    assert f.subject.endswith("param1")
    assert "create_graph" not in f.message + f.advice
