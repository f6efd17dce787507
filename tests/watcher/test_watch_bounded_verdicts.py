"""The per-tensor bound changes no verdict: a 3,000-step run recorded with every step's
detail kept and with 64 steps kept gives the same findings.

Exact, word for word: every rule that reads totals or the running per-tensor facts
(GS401's origin, GS402/GS403's spikes, GS411/GS413, GS417 and the rest). Sampled
medians (GS405's layer norms, GS409/GS410's update ratios) are taken over the kept steps,
an evenly spaced sample of a long run: there the verdict (rule, subject, severity, steps)
is the same and the median may differ in its last digits. GS403's line of the layers
that drove the spike reads the spike step's norms (its detail is kept: one of the largest
jumps of the norm) against the kept steps before it: same layers, same norm at the spike,
their usual level a sample's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from synthetic_steps import recorded

from gradscope.config import Thresholds
from gradscope.rules import watch as rules
from gradscope.steps.step_store import JUMPS_KEPT

STEPS = 3000
SAMPLED = {"GS405", "GS409", "GS410"}


def _comparable(finding):
    if finding.rule in SAMPLED:
        return (finding.rule, finding.subject, finding.severity, finding.steps)
    if finding.rule == "GS403":
        kept = tuple(e for e in finding.evidence if not e.startswith("layers that drove"))
        return replace(finding, evidence=kept)
    return finding


@pytest.fixture(scope="module")
def both():
    full = recorded(STEPS, detail_steps=10**6)
    thin = recorded(STEPS, detail_steps=64)
    return full, thin


def test_the_bound_holds_and_the_full_run_keeps_everything(both):
    full, thin = both
    assert all(r.detail for r in full.steps)
    most = 64 + 2 + JUMPS_KEPT + 1  # grid, first and latest, jumps, first non-finite
    assert len(thin.store.detail.rows) <= most and len(thin.store.sampled.rows) <= 66
    assert sum(r.detail for r in thin.steps) <= most + 66


def test_every_verdict_is_the_same_with_64_steps_of_detail(both):
    full, thin = both
    t = Thresholds()
    everything, bounded = rules.diagnose(full, t), rules.diagnose(thin, t)
    fired = {(f.rule, f.subject) for f in everything}
    # the run has one of each thing the per-tensor rules look for
    assert {
        ("GS401", "enc.bias"),
        ("GS402", "loss"),
        ("GS403", "total-grad-norm"),
        ("GS409", "enc.weight"),
        ("GS411", "frozen.weight"),
        ("GS413", "unused.weight"),
        ("GS417", "head.weight"),
        ("GS417", "aux.weight"),
    } <= fired
    assert [_comparable(f) for f in bounded] == [_comparable(f) for f in everything]
    exact = [f for f in everything if f.rule not in SAMPLED | {"GS403"}]
    assert exact and all(f in bounded for f in exact)  # word for word
    (full_spike,) = [f for f in everything if f.rule == "GS403"]
    (thin_spike,) = [f for f in bounded if f.rule == "GS403"]
    assert _drivers(thin_spike) == _drivers(full_spike) == ["enc 45.8", "aux 1.91", "head 1.31"]


def _drivers(finding) -> list[str]:
    (line,) = [e for e in finding.evidence if e.startswith("layers that drove")]
    return [d.split(" (")[0] for d in line.split(": ", 1)[1].split(", ")]


def test_the_first_non_finite_step_keeps_its_detail(both):
    _, thin = both
    (origin,) = [r for r in thin.steps if r.step == STEPS * 5 // 6]
    assert origin.detail and origin.param_norms[1] != origin.param_norms[1]  # NaN
