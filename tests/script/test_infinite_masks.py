"""`inspect --script`'s NaN origin over a mask filled with float('-inf'): the fill is the
script's choice, not the fault, so the op named is the first to make NaN of it (-inf times
a one-hot's 0, a log-softmax over a row masked whole), with the cure for that op; a -inf
that reaches the loss with no NaN names the fill. A log of zero with no mask is still made
from finite inputs, and a mask used right says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

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
    assert evidence.startswith("first NaN made by `mul` at action_mask.py:38"), evidence
    fill = "`__setitem__` at action_mask.py:32" if mode == "setitem" else "`masked_fill`"
    assert f"held the -inf of a mask (filled by {fill}" in evidence
    assert "-inf times 0" in evidence and "gather the chosen action" in evidence


def test_a_row_masked_whole_names_the_log_softmax():
    evidence = _evidence("whole")
    assert evidence.startswith("first NaN made by `log_softmax` at action_mask.py:35")
    assert "a row the mask filled whole" in evidence


def test_a_minus_inf_that_reaches_the_loss_names_the_fill():
    evidence = _evidence("sumall")
    assert evidence.startswith("the loss is non-finite through the -inf of a mask (filled by")
    assert "`masked_fill` at action_mask.py:34" in evidence


def test_a_log_of_zero_is_still_made_from_finite_inputs():
    evidence = _evidence("log0")
    assert evidence.startswith("first non-finite value made by `log`"), evidence
    assert "from finite inputs" in evidence and "of a mask" not in evidence


def test_a_log_of_zero_after_the_masks_minus_inf_is_gone_names_the_log():
    """What a mask's -inf reached is judged by NaN, or by ±inf made where no input held
    any: a log of 0 downstream of the mask is the fault, not the mask."""
    evidence = _evidence("after")
    assert evidence.startswith("first non-finite value made by `log` at action_mask.py:45")
    assert "from finite inputs" in evidence and "of a mask" not in evidence


@pytest.mark.parametrize("mode", ["time0", "inverse"])
def test_a_division_by_a_time_of_zero_after_the_mask_names_the_division(mode):
    """The mask's -inf is gone once the allowed entries are gathered: the NaN (0/0) or inf
    (1/0) of a weight 1/t at t = 0 is the division's, and its zero divisor is said."""
    evidence = _evidence(mode)
    assert evidence.startswith("first non-finite value made by `"), evidence
    assert "of a mask" not in evidence and "gather the chosen action" not in evidence
    assert "its divisor held zeros" in evidence and "clamp(min=eps)" in evidence


@pytest.mark.parametrize("mode", ["gather", "finfo", "timed"])
def test_a_mask_used_right_says_nothing(mode):
    assert _evidence(mode) == ""


class _Policy(torch.nn.Module):
    """Log-probabilities over three actions, the third masked with -inf (or finfo.min)."""

    def __init__(self, fill: float) -> None:
        super().__init__()
        self.head = torch.nn.Linear(4, 3)
        self.fill = fill

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(x.shape[0], 3, dtype=torch.bool)
        mask[:, 2] = True
        return self.head(x).masked_fill(mask, self.fill).log_softmax(-1)


@pytest.mark.parametrize("fill", [float("-inf"), torch.finfo(torch.float32).min])
def test_a_model_whose_mask_meets_a_one_hot_names_the_product_when_replayed(fill):
    """`inspect` of a model (its forward replayed) reads the mask as the live watch does."""
    torch.manual_seed(0)
    onehot = torch.nn.functional.one_hot(torch.zeros(8, dtype=torch.long), 3)
    report = gradscope.inspect(_Policy(fill), torch.randn(8, 4), lambda lp: -(lp * onehot).sum())
    found = [" ".join(f.evidence) for f in report.findings if f.rule == "GS102"]
    if fill == float("-inf"):
        assert found and found[0].startswith("first NaN made by `mul`"), found
        assert "filled by `masked_fill`" in found[0]
    else:
        assert found == []


def test_a_replayed_model_whose_time_weight_divides_by_zero_names_the_division():
    """The replay reads NaN made of a mask's -inf as the live watch does: a 0/0 of a weight
    at t = 0 after the allowed entries were gathered is the division's, not the mask's."""
    torch.manual_seed(0)
    t = torch.arange(8.0) / 7
    kept = (t > 0).float()

    def loss_fn(lp: torch.Tensor) -> torch.Tensor:
        return -(lp.gather(1, torch.zeros(8, 1, dtype=torch.long)).squeeze(1) * kept / t).sum()

    report = gradscope.inspect(_Policy(float("-inf")), torch.randn(8, 4), loss_fn)
    found = [" ".join(f.evidence) for f in report.findings if f.rule == "GS102"]
    assert found and found[0].startswith("first non-finite value made by `div`"), found
    assert "of a mask" not in found[0]
