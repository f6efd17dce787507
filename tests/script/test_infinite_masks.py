"""`inspect --script`'s NaN origin over a mask filled with float('-inf'): the fill is the
script's choice, not the fault, so the op named is the first to make NaN of it (-inf times
a one-hot's 0, a log-softmax over a row masked whole), with the cure for that op; a -inf
that reaches the loss with no NaN names the fill. A log of zero with no mask is still made
from finite inputs, and a mask used right says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradscope

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(autouse=True)
def _in_scripts(monkeypatch):
    monkeypatch.chdir(SCRIPTS)


def _evidence(mode: str) -> str:
    report = gradscope.inspect_script("action_mask.py", [mode], step=1)
    found = [f for f in report.findings if f.rule == "GS102"]
    return " ".join(" ".join(found[0].evidence).split()) if found else ""


@pytest.mark.parametrize("mode", ["onehot", "setitem"])
def test_a_one_hot_product_over_a_minus_inf_mask_names_the_product(mode):
    evidence = _evidence(mode)
    assert evidence.startswith("first NaN made by `mul` at action_mask.py:36"), evidence
    fill = "`__setitem__` at action_mask.py:30" if mode == "setitem" else "`masked_fill`"
    assert f"held the -inf of a mask (filled by {fill}" in evidence
    assert "-inf times 0" in evidence and "gather the chosen action" in evidence


def test_a_row_masked_whole_names_the_log_softmax():
    evidence = _evidence("whole")
    assert evidence.startswith("first NaN made by `log_softmax` at action_mask.py:33")
    assert "a row the mask filled whole" in evidence


def test_a_minus_inf_that_reaches_the_loss_names_the_fill():
    evidence = _evidence("sumall")
    assert evidence.startswith("the loss is non-finite through the -inf of a mask (filled by")
    assert "`masked_fill` at action_mask.py:32" in evidence


def test_a_log_of_zero_is_still_made_from_finite_inputs():
    evidence = _evidence("log0")
    assert evidence.startswith("first non-finite value made by `log`"), evidence
    assert "from finite inputs" in evidence and "of a mask" not in evidence


@pytest.mark.parametrize("mode", ["gather", "finfo"])
def test_a_mask_used_right_says_nothing(mode):
    assert _evidence(mode) == ""
