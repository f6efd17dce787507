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


def test_a_prior_that_falls_under_its_floor_midway_is_information():
    """The KL starts over its free nats and falls under them for good: the prior's gradient
    norm goes to exactly 0 by design (GS405 warned of dead units)."""
    findings = domain_watched("free_nats.py", "falls").findings
    assert [f.severity for f in findings if f.rule in ("GS405", "GS417")] == [Severity.INFO]
    assert all(f.severity == Severity.INFO for f in findings)


def test_a_prior_frozen_midway_over_its_floor_still_warns():
    told = [f for f in domain_watched("free_nats.py", "frozen").findings if f.rule == "GS417"]
    assert {f.subject for f in told} == PRIOR
    assert all(f.severity == Severity.WARNING and "frozen" in f.advice for f in told)


def test_zeros_below_a_floor_after_learning_are_information_for_gs417():
    """GS417 on a prior that had gradients, then only zeros while below a floor on a loss
    term (DreamerV3's free bits at 1.0); None instead (a freeze) keeps the warning."""
    from gradscope.findings import RULES
    from gradscope.rules import floor_stop
    from gradscope.steps.records import ParamInfo
    from gradscope.steps.tensor_track import Learned

    p = ParamInfo("prior.weight", (4, 8), True, True, 1e-3, below_floor=True)
    warned = RULES["GS417"].finding(p.name, "prior.weight stopped learning at step 70", "x")
    zeros = Learned(70, 69, 69, 0.1, 2, 70, none_after=0, zero_after=30)
    assert floor_stop.stopped(warned, p, zeros).severity == Severity.INFO
    none = Learned(70, 69, 69, 0.1, 2, 70, none_after=30, zero_after=0)
    assert floor_stop.stopped(warned, p, none).severity == Severity.WARNING
