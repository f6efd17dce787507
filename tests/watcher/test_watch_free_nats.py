"""A KL held at its free-nats floor over a whole short run (Dreamer's
`torch.clamp(kl, min=free_nats)` with the KL still under it) passes no gradient to the prior,
by design: `watch` warned "it never learns" (GS413) where `inspect` already told it as
information. It is told as the floor's now, read in the first graphs from the clamp's saved
input and bound; a floor the KL is over trains the prior, and a prior behind a dead ReLU (or
an activation clamped at 0 that is all off) before the floor still warns."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

PRIOR = {"prior.weight", "prior.bias"}


def _told(mode: str):
    return [f for f in domain_watched("free_nats.py", mode).findings if f.rule == "GS413"]


@pytest.mark.parametrize("mode", ["clamp", "maximum", "vector"])
def test_a_prior_held_at_the_floor_all_run_is_information(mode):
    told = _told(mode)
    assert {f.subject for f in told} == PRIOR
    assert all(f.severity == Severity.INFO and "free-nats" in f.message for f in told)


def test_a_kl_over_its_floor_trains_the_prior():
    assert _told("above") == []


@pytest.mark.parametrize("bug", ["dead", "dead-clamp"])
def test_a_prior_behind_a_dead_activation_still_warns(bug):
    told = _told(bug)
    assert {f.subject for f in told} == PRIOR
    assert all(f.severity == Severity.WARNING and "never learns" in f.message for f in told)
