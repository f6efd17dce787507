"""A head one step of a script leaves out of its loss may be used by a later step: a
heteroscedastic model's variance head joins the loss after a warm-up of its mean. inspect
at the first step still reports it (GS101, true of that step), with advice to look at a later
step before deleting or freezing it; a model file's one pass has no later step."""

from __future__ import annotations

import os

import torch

import gradscope
from tests.watcher.watch_scripts import DOMAINS

WARMUP = os.path.join(DOMAINS, "mean_variance_warmup.py")
HEAD = {"log_var.weight", "log_var.bias"}


def _none_grad(report):
    return {f.subject: f for f in report.findings if f.rule == "GS101"}


def test_a_head_left_out_during_a_warm_up_is_not_called_dead_weight_alone():
    found = _none_grad(gradscope.inspect_script(WARMUP, []))
    assert set(found) == HEAD
    assert all("--step N" in f.advice and "later step" in f.advice for f in found.values())


def test_past_the_warm_up_the_head_gets_its_gradient():
    assert _none_grad(gradscope.inspect_script(WARMUP, [], step=5)) == {}


def test_detached_the_head_is_still_reported_past_the_warm_up():
    assert set(_none_grad(gradscope.inspect_script(WARMUP, ["detached"], step=5))) == HEAD


def test_a_model_file_has_no_later_step():
    """Its one pass is all there is: an unused output is dead weight, as before."""
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(2, 1), "unused": torch.nn.Linear(2, 1)})

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = model

        def forward(self, x):
            self.heads["unused"](x)
            return self.heads["used"](x).sum()

    found = _none_grad(gradscope.inspect(TwoHeads(), torch.randn(4, 2)))
    assert found and all("later step" not in f.advice for f in found.values())
