"""`inspect --script`'s NaN origin says when the op that made it (a log, a square root) was
fed values below its domain: a Gaussian likelihood's scale used raw, where the fix is a
softplus, not the clamp or epsilon that fit a log of zero (a ReLU'd scale of exactly 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradscope

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(autouse=True)
def _in_scripts(monkeypatch):
    monkeypatch.chdir(SCRIPTS)


def _evidence(mode: str) -> str:
    report = gradscope.inspect_script("gaussian_scale.py", [mode], step=1)
    found = [f for f in report.findings if f.rule == "GS102"]
    return " ".join(found[0].evidence) if found else ""


def test_a_log_of_a_raw_scale_says_its_input_went_negative():
    evidence = _evidence("raw")
    assert "made by `log`" in evidence and "below its domain (negative)" in evidence
    assert "softplus" in evidence


def test_a_log_of_a_scale_of_zero_is_not_called_negative():
    evidence = _evidence("relu")
    assert "made by `log`" in evidence and "below its domain" not in evidence


def test_a_softplus_scale_has_no_nan():
    assert _evidence("softplus") == ""
