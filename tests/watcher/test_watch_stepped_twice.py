"""GS456: a tensor two interleaving optimizers both step with their own backward's
gradients (DARTS's alpha handed to the weights' SGD too) is named; the healthy search,
where each optimizer has its own tensors, an optimizer built anew for a later phase, a
meta-optimizer whose step follows no backward (Reptile's outer step) and PPG's policy and
auxiliary optimizers over one network, taking turns in phases, are silent."""

from __future__ import annotations

import pytest
from watch_scripts import step_record

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.step_shared import stepped_twice
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def alpha_in_w():
    return domain_watched("darts_search.py", "alpha-in-w")


def test_darts_alpha_in_the_weights_optimizer_is_named(alpha_in_w):
    (f,) = [f for f in alpha_in_w.findings if f.rule == "GS456"]
    assert f.severity == Severity.WARNING and f.subject == "alphas"
    assert "optimizer 0 (Adam) and optimizer 1 (SGD)" in f.message


PARAMS = (
    ParamInfo("w", (4, 4), True, True, 0.1, 0, 1.0),
    ParamInfo("b", (4,), True, True, 0.1, 0, 1.0),
)


def _run(order: list[int], backward: dict[int, int]) -> WatchRun:
    """Steps of optimizers 0 and 1 in `order`, both holding both tensors; `backward`: the
    backward calls before each optimizer's steps (1 unless given)."""
    steps = [
        step_record(n, optimizer=k, backward_calls=backward.get(k, 1), param_norms=(0.5, 0.5))
        for n, k in enumerate(order, start=1)
    ]
    return WatchRun(
        "script s.py",
        PARAMS,
        tuple(steps),
        "completed",
        1.0,
        optimizers=("Adam", "SGD"),
        members=((0, 1), (0, 1)),
    )


def test_interleaved_optimizers_on_the_same_tensors_are_named():
    (f,) = stepped_twice(_run([0, 1] * 10, {}), Thresholds())
    assert f.subject == "w, b"


def test_a_later_phases_optimizer_and_a_reptile_outer_step_are_silent():
    assert stepped_twice(_run([0] * 10 + [1] * 10, {}), Thresholds()) == []
    reptile = _run(([0] * 5 + [1]) * 4, {1: 0})  # the outer step: its gradient by hand
    assert stepped_twice(reptile, Thresholds()) == []


def test_an_optimizer_whose_tensors_were_not_recorded_shares_nothing():
    run = _run([0, 1] * 10, {})
    unknown = WatchRun(**{**run.__dict__, "members": ((0, 1),)})
    assert stepped_twice(unknown, Thresholds()) == []


def test_one_networks_phase_optimizers_taking_turns_are_silent():
    """PPG: the policy phase's Adam and the auxiliary phase's Adam over the same network,
    each stepping in runs of its own (several steps before the other takes over)."""
    assert stepped_twice(_run(([0] * 6 + [1] * 2) * 4, {}), Thresholds()) == []
    assert stepped_twice(_run(([0] * 3 + [1] * 3) * 4, {}), Thresholds()) == []


def test_turns_of_one_step_or_a_superset_in_phases_are_still_named():
    """A step of each per iteration on the same tensors (a GAN's two optimizers both built
    over one wrapper module), and phases where one optimizer also holds tensors the other
    does not (it has its own, so the shared ones are one too many) stay named."""
    assert len(stepped_twice(_run([0, 0, 0, 1] * 6, {}), Thresholds())) == 1
    superset = _run(([0] * 6 + [1] * 2) * 4, {})
    superset = WatchRun(**{**superset.__dict__, "members": ((0, 1), (0,))})
    (f,) = stepped_twice(superset, Thresholds())
    assert f.subject == "w"


@pytest.fixture(scope="module")
def ppg():
    return domain_watched("ppg_phases.py")


def test_ppg_policy_and_auxiliary_phases_are_silent(ppg):
    assert not ppg.faults, ppg.internal_error()
    assert [f for f in ppg.findings if f.severity >= Severity.WARNING] == [], ppg.findings
