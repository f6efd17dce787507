"""The parts of a model whose own forward never ran are reported as that model when every
parameter it holds is in them; a container with a part that did not run, or two models
with no parent in common, are left as they ran."""

from __future__ import annotations

from torch import nn

from gradscope.inspector.unran_parents import lifted


class _WorldModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc, self.prior, self.dec = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2)


def test_the_parts_of_a_model_that_never_ran_are_that_model():
    wm = _WorldModel()
    assert lifted([wm.enc, wm.prior, wm.dec]) == [wm]


def test_nested_parts_are_lifted_to_the_outermost_model_they_fill():
    outer = nn.ModuleDict({"wm": _WorldModel(), "head": nn.Linear(2, 1)})
    wm = outer["wm"]
    assert lifted([wm.enc, wm.prior, wm.dec, outer["head"]]) == [outer]


def test_a_part_that_did_not_run_keeps_its_parent_out():
    wm = _WorldModel()
    assert lifted([wm.enc, wm.prior]) == [wm.enc, wm.prior]


def test_two_models_with_no_parent_in_common_stay_two():
    g, d = nn.Linear(2, 2), nn.Linear(2, 1)
    assert lifted([g, d]) == [g, d]
