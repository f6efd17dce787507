"""GS419 reads the loss's own signs (it did not fall, it sits at the uniform guess) only with
one optimizer, as GS414 and GS415 do: with several, a loss that stays flat is the game's
equilibrium (a GAN's or GAIL's discriminator holds 2 ln 2 while its opponent keeps up). On a
healthy GAIL, whose policy agreed with the expert on 98% of states, GS419 told the
discriminator's Adam at lr 3e-3 to lower its lr 24×. A learning rate that rewrites the
weights every few steps is still named, whatever the game."""

from __future__ import annotations

import math
import random

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import GroupSettings, LossKind, LossTerm, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

BCE = LossKind((LossTerm("binary_cross_entropy_with_logits", "mean", 1.0),) * 2)
PPO = LossKind((), unknown_terms=3)
ADAM = (OptimizerSettings("Adam", 1, (GroupSettings(3e-3, betas=(0.9, 0.999)),), "adam"),)


def gail(ratio: float, n: int = 200) -> WatchRun:
    """The discriminator's BCE at 2 ln 2 over n steps with update ratios `ratio`, then the
    policy's PPO loss around 0, alternating as GAIL's loop does."""
    rng = random.Random(3)
    recs = []
    for s in range(1, 2 * n + 1):
        d = s % 2 == 1
        loss = 2 * math.log(2) * math.exp(rng.gauss(0, 0.02)) if d else rng.gauss(0, 0.1)
        kw = {"update_ratios": (ratio, math.nan)} if d else {"update_ratios": (math.nan, 1e-3)}
        recs.append(step_record(s, 0.3, loss, optimizer=0 if d else 1, lrs=(3e-3,), **kw))
    params = (
        ParamInfo("disc.0.weight", (64, 7), True, True, 1.0),
        ParamInfo("pi.0.weight", (64, 4), True, True, 1.0),
    )
    return WatchRun(
        "script gail.py",
        params,
        tuple(recs),
        "completed",
        1.0,
        optimizers=("Adam", "Adam"),
        members=((0,), (1,)),
        loss_kinds=(BCE, PPO),
        settings=(ADAM, ADAM),
    )


def _lr(run: WatchRun) -> list:
    return [f for f in rules.diagnose(run, Thresholds()) if f.rule == "GS419"]


def test_a_discriminator_at_its_equilibrium_is_no_sign_of_an_lr_too_high():
    assert _lr(gail(0.025)) == []


def test_a_discriminator_rewritten_every_few_steps_is_still_named():
    (f,) = _lr(gail(0.5))
    assert f.severity == Severity.WARNING and "optimizer 0" in f.message
