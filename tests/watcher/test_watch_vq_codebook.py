"""A VQ-VAE's codebook and commitment losses (‖sg(z) - e‖² + β‖z - sg(e)‖²) each target
the other's input, detached: the encoder's outputs and the code vectors are pulled toward
each other and both move as the model learns, so the sum rises for a hundred steps while
the reconstruction falls. The loss was judged as a single MSE objective: GS414 'never
recovered' (an error, 'lower the learning rate') and, on a slower climb, GS402 spikes
against a rolling median the climb outran. A real spike in the same run, and a climb of
a loss whose targets are data, are still named."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F
from test_watch_rules_series import found, rec, run_of

from gradscope.findings import Severity
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.watcher import loss_graph
from tests.watcher.watch_scripts import domain_watched


def _loud(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def test_the_terms_that_target_each_others_input_are_marked():
    torch.manual_seed(0)
    z = torch.randn(6, 3, requires_grad=True) * 2
    e = torch.randn(6, 3, requires_grad=True) * 1
    x = torch.randn(6, 3)
    loss = F.mse_loss(z + e, x) + F.mse_loss(e, z.detach()) + 0.25 * F.mse_loss(z, e.detach())
    assert [t.own_target for t in loss_graph.read(loss).terms] == [False, True, True]


def test_a_detached_target_no_other_term_trains_is_not_marked():
    torch.manual_seed(0)
    w = torch.randn(4, 3, requires_grad=True)
    teacher = (torch.randn(6, 4) @ w).detach()  # a target made by the model, not an input
    x, y = torch.randn(6, 4), torch.randn(6, 3)
    loss = F.mse_loss(x @ w, y) + F.mse_loss(torch.randn(6, 4) @ w, teacher)
    assert not loss_graph.read(loss).own_targets()


@pytest.fixture(scope="module")
def healthy():
    return domain_watched("vq_codebook.py")


def test_a_vq_loss_that_rises_while_it_learns_is_not_judged_by_its_trend(healthy):
    assert not healthy.faults, healthy.internal_error()
    assert healthy.run.steps[-1].loss > 2 * healthy.run.steps[0].loss  # the sum rose
    assert _loud(healthy) == [], healthy.findings
    (blowup,) = [f for f in healthy.findings if f.rule == "GS414"]
    assert "targets another term's input" in blowup.advice


def test_a_corrupted_batch_in_the_same_run_is_still_a_spike():
    spiked = domain_watched("vq_codebook.py", "spike")
    loud = [f for f in _loud(spiked) if f.rule == "GS402"]
    assert loud and 91 in loud[0].steps, spiked.findings


def _climb(n=240, seed=0):
    """A loss flat at 0.13 for 100 steps, then climbing smoothly to 0.4 (1% noise)."""
    rng = random.Random(seed)
    losses = [0.13 if i < 100 else 0.13 + 0.27 * min(1.0, (i - 100) / 100) for i in range(n)]
    return [
        rec(i + 1, v * math.exp(rng.gauss(0, 0.01)), 1.0 + 0.05 * rng.random())
        for i, v in enumerate(losses)
    ]


OWN = LossKind(
    (
        LossTerm("mse", "mean", 1.0),
        LossTerm("mse", "mean", 1.0, own_target=True),
        LossTerm("mse", "mean", 0.25, own_target=True),
    )
)
DATA = LossKind((LossTerm("mse", "mean", 1.0),) * 3)


def test_a_climb_of_a_loss_whose_terms_target_each_other_is_no_spike():
    assert "GS402" not in found(run_of(_climb(), kind=OWN))


def test_the_same_climb_of_a_loss_whose_targets_are_data_is_still_named():
    assert "GS402" in found(run_of(_climb(), kind=DATA))


def test_a_jump_out_of_the_climb_is_still_a_spike():
    records = _climb()
    records[170] = rec(171, 30 * records[170].loss, 1.0)
    (spike,) = found(run_of(records, kind=OWN))["GS402"]
    assert spike.severity == Severity.WARNING and spike.steps == (171,)


CUSTOM = LossKind((LossTerm("smooth_l1", "mean", 1.0),), unknown_terms=1)
"""An actor-critic's loss: a value regression plus a policy term gradscope does not know."""


def test_bursts_the_loss_comes_back_from_are_no_climb():
    """Jumps in a level their neighbours share, but over within a few steps: each burst's
    spikes stay, for GS402 to judge together (spikes_by_design)."""
    rng = random.Random(1)
    losses = [10.0 * math.exp(rng.gauss(0, 0.05)) for _ in range(200)]
    burst = [80.0, 90.0, 30.0, 100.0, 85.0, 30.0, 95.0, 80.0, 30.0, 90.0, 85.0]
    for start in (60, 100, 140):  # bursts of jumps (an episode's end), each back at once
        losses[start : start + len(burst)] = burst
    records = [rec(i + 1, v, 1.0 + 0.05 * rng.random()) for i, v in enumerate(losses)]
    (spike,) = found(run_of(records, kind=CUSTOM))["GS402"]
    assert {step // 40 for step in spike.steps} == {1, 2, 3}, spike  # 61-71, 101-111, 141-151
