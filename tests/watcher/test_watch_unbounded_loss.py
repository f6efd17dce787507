"""A loss that falls without bound (GS423): a VAE whose KL is subtracted falls ever faster
while its gradient grows, and was given a clean verdict (IWAE: loss 6.2 → -2350, gradient
norm 2.9 → 545, no finding). Its look-alikes stay silent: a density's NLL below 0 that
settles while its gradient grows 40× (elbo_sign.py's flow), a descent that slows, a GAN's
several optimizers, a loss whose graph bounds it below."""

from __future__ import annotations

import math
import statistics

import pytest
from test_watch_rules_series import found, rec, run_of

from gradscope.findings import Severity
from gradscope.steps.meaning import LossKind, LossTerm
from tests.watcher.watch_scripts import domain_watched

CUSTOM = LossKind((LossTerm("binary_cross_entropy_with_logits", "mean", 1.0),), unknown_terms=1)
"""A reconstruction the graph knows plus a term it does not (a hand-written KL)."""


def _loud(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING and not f.explained_by]


@pytest.fixture(scope="module")
def subtracted():
    return domain_watched("elbo_sign.py", "meansign")


@pytest.fixture(scope="module")
def flow():
    return domain_watched("elbo_sign.py", "flow")


def test_a_subtracted_kl_is_a_loss_that_falls_without_bound(subtracted):
    (f,) = _loud(subtracted)
    assert f.rule == "GS423" and f.severity == Severity.ERROR, subtracted.findings
    assert "falls without bound" in f.message and "sign" in f.message
    assert "lr is not the cause" in f.advice


def test_a_density_nll_below_zero_that_settles_is_silent(flow):
    steps = flow.to_dict()["summary"]["per_optimizer"][0]
    assert steps["steps"] == 120
    assert flow.run.steps[-1].loss < -30  # an NLL far below 0, its gradient 40x its start
    assert max(r.grad_norm for r in flow.run.steps) > 20 * flow.run.steps[0].grad_norm
    assert _loud(flow) == [], flow.findings


def _series(losses, norms):
    return [rec(i + 1, v, g) for i, (v, g) in enumerate(zip(losses, norms, strict=True))]


def _falling(n=150, power=2.0, growth=50.0):
    """A loss falling as -t^power from 5, its gradient norm growing `growth`-fold."""
    losses = [5.0 - 0.01 * i**power + 0.3 * math.sin(i) for i in range(n)]
    norms = [growth ** (i / n) * (1 + 0.1 * math.cos(i)) for i in range(n)]
    return losses, norms


def test_a_fall_that_speeds_up_with_the_gradient_is_named_at_its_step():
    losses, norms = _falling()
    (f,) = found(run_of(_series(losses, norms), kind=CUSTOM))["GS423"]
    line = 10 * statistics.median(norms[:30])  # 10x the first window's median
    assert f.steps == (next(i + 1 for i, g in enumerate(norms) if g >= line),)
    linear = found(run_of(_series(*_falling(power=1.0)), kind=None))
    assert "GS423" in linear  # a linear fall counts: no minimum nears


@pytest.mark.parametrize(
    "case",
    ["slows", "grad_flat", "bounded", "two_optimizers"],
)
def test_the_look_alikes_are_silent(case):
    losses, norms = _falling()
    kind, optimizers = CUSTOM, ("Adam",)
    if case == "slows":  # a density NLL settling below 0, its gradient noise growing
        losses = [-40 * (1 - math.exp(-i / 25)) + 0.3 * math.sin(i) for i in range(150)]
    elif case == "grad_flat":
        norms = [1.0 + 0.1 * math.cos(i) for i in range(150)]
    elif case == "bounded":  # the graph bounds it below: GS418's, not this rule's
        kind = LossKind((LossTerm("mse", "mean", 1.0),))
    records = _series(losses, norms)
    if case == "two_optimizers":  # a GAN's generator and discriminator
        records = [rec(r.step, r.loss, r.grad_norm, optimizer=r.step % 2) for r in records]
        optimizers = ("Adam", "Adam")
    assert "GS423" not in found(run_of(records, optimizers=optimizers, kind=kind))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["vae", "anneal", "klsign"])
def test_a_vae_is_silent_and_its_flipped_kl_explains_the_exploding_trend(mode):
    """The KL written out (exp(logvar) beside -logvar) is read from the graph: subtracted, it
    is a bounded loss ascended (GS418, by the sign); meansign's KL, the mean's square alone,
    is not read, and its fall is told by its values (GS423)."""
    report = domain_watched("elbo_sign.py", mode)
    loud = [f.rule for f in _loud(report)]
    assert loud == ([] if mode != "klsign" else ["GS418"]), report.findings
    if mode == "klsign":  # the variance's exp: the gradient's trend is steady enough for GS404
        trend = [f for f in report.findings if f.rule == "GS404"]
        assert trend and trend[0].explained_by == "GS418:loss", report.findings


def test_under_maximize_the_objective_is_read_with_its_sign():
    """maximize=True on a log-likelihood: its rise is the descent. One that settles is
    silent; one that climbs ever faster with its gradient is the unbounded fall."""
    from gradscope.steps.meaning import GroupSettings, OptimizerSettings

    group = GroupSettings(1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=True)
    ascent = OptimizerSettings("Adam", 1, (group,), "adam")
    settles = [40 * (1 - math.exp(-i / 25)) for i in range(150)]
    climbs, norms = _falling()
    for losses, fires in ((settles, False), ([-v for v in climbs], True)):
        run = run_of(_series(losses, norms), kind=None)
        run = run.__class__(**{**run.__dict__, "settings": ((ascent,),)})
        assert ("GS423" in found(run)) is fires
        plain = found(run_of(_series(losses, norms), kind=None))
        assert "GS423" not in plain  # without maximize, a rising loss is no fall
