"""A KL held at its free-nats floor (Dreamer's `torch.clamp(kl, min=free_nats)`) passes no
gradient to the prior while it sits below the floor, by design: GS106 tells it as
information, read in the graph from the clamp's saved input and bound (it warned of dead
ReLUs). A floor the KL is over trains the prior; a prior behind a dead ReLU, or behind an
activation clamped at 0 that is all off, still warns."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

FREE_NATS = os.path.join(DOMAINS, "free_nats.py")
PRIOR = {"prior.weight", "prior.bias"}  # named as the world model holds them


def _findings(mode: str):
    import gradscope

    return gradscope.inspect_script(FREE_NATS, [mode]).findings


@pytest.mark.parametrize("mode", ["clamp", "maximum", "vector"])
def test_a_kl_held_at_its_floor_is_information(mode):
    found = _findings(mode)
    assert [f for f in found if f.severity >= Severity.WARNING] == [], found
    told = [f for f in found if f.rule == "GS106"]
    assert {f.subject for f in told} == PRIOR, found
    assert all("through a clamp" in f.message for f in told)


def test_a_kl_over_its_floor_trains_the_prior():
    assert _findings("above") == []


@pytest.mark.parametrize("bug", ["dead", "dead-clamp"])
def test_a_dead_relu_before_the_clamp_still_warns(bug):
    """A ReLU, or an activation clamped at 0, whose bias keeps every unit off."""
    found = _findings(bug)
    loud = {f.subject for f in found if f.rule == "GS106" and f.severity == Severity.WARNING}
    assert loud == PRIOR, found
