"""A spiking layer whose spike is a plain comparison, (mem > threshold).float(): the layer
before it gets no gradient. The live watch of a script's step did not count a comparison as a
cut (its output is boolean, as a mask's is), so GS101 named no op, and the replay named `gt`
with the advice to find a .detach(); the fix is a surrogate gradient or a straight-through
estimator. A surrogate and a comparison that only selects are silent; a .detach() still gets
the .detach() advice."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

SPIKING = os.path.join(DOMAINS, "spiking_lif.py")


def _none_grad(mode: str):
    import gradscope

    found = gradscope.inspect_script(SPIKING, [mode]).findings
    return found, [f for f in found if f.rule == "GS101"]


@pytest.mark.parametrize("mode", ["surrogate", "mask"])
def test_a_surrogate_or_a_selecting_mask_is_silent(mode):
    found, _ = _none_grad(mode)
    assert [f for f in found if f.severity >= Severity.WARNING] == [], found


def test_a_comparison_as_the_spike_is_named_with_the_surrogate():
    _, none = _none_grad("heaviside")
    assert {f.subject for f in none} == {"hidden.weight", "hidden.bias"}, none
    assert all("`gt`" in " ".join(f.evidence) for f in none), none
    assert all("surrogate gradient" in f.advice for f in none)


def test_a_detached_spike_keeps_the_detach_advice():
    _, none = _none_grad("detached")
    assert none and all(".detach()" in " ".join(f.evidence) for f in none), none
    assert all("surrogate" not in f.advice and ".detach()" in f.advice for f in none)


def test_a_comparison_in_a_replayed_model_gets_the_surrogate_advice():
    import torch
    from torch import nn

    import gradscope

    class Step(nn.Module):
        def forward(self, v):
            return (v > 0).float()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), Step(), nn.Linear(8, 2))
    none = [f for f in gradscope.inspect(model, torch.randn(4, 6)).findings if f.rule == "GS101"]
    assert {f.subject for f in none} == {"0.weight", "0.bias"}, none
    assert all("surrogate gradient" in f.advice for f in none)
