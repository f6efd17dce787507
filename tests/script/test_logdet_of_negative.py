"""`inspect --script`'s NaN origin says when a logdet was fed a matrix of negative
determinant (a flow's weight started as a reflection): the fix is slogdet's log|det W|, not
the clamp or epsilon that fit a log of zero; a singular weight (logdet -inf, at the edge)
is not called negative, and slogdet has no NaN."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradscope

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(autouse=True)
def _in_scripts(monkeypatch):
    monkeypatch.chdir(SCRIPTS)


def _evidence(mode: str) -> str:
    report = gradscope.inspect_script("flow_logdet.py", [mode], step=1)
    found = [f for f in report.findings if f.rule == "GS102"]
    return " ".join(found[0].evidence) if found else ""


def test_a_logdet_of_a_negative_determinant_says_so_and_names_slogdet():
    evidence = _evidence("logdet")
    assert "made by `logdet`" in evidence and "determinant is negative" in evidence
    assert "torch.linalg.slogdet(W).logabsdet" in evidence


def test_a_logdet_of_a_singular_matrix_is_not_called_negative():
    evidence = _evidence("singular")
    assert "made by `logdet`" in evidence and "negative" not in evidence


def test_slogdet_has_no_nan():
    assert _evidence("slogdet") == ""
