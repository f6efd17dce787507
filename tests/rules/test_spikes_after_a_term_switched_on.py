"""GS403 in a game whose generator trained alone first (Parallel WaveGAN's generator on its
spectral losses, the discriminator and the adversarial term switched on at step 50): the
generator's loss rose to a new level there and held it, and its gradient norm's later turns
came back as a game's do. The loss's rise is GS402's level, not a spike with each turn:
information. A loss that jumps with the norm and holds there (a collapse) still warns. No
torch."""

from __future__ import annotations

import math
import random

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

G = ParamInfo("generator.weight", (8, 8), True, True, 1e-4, 0, 1.0)
D = ParamInfo("discriminator.weight", (8, 8), True, True, 5e-5, 0, 1.0)
CUSTOM = LossKind((), unknown_terms=6)
TURNS = {70: 9.0, 100: 5.0, 106: 15.0}
"""The generator's norm at three turns of the game, × its level."""


def _run(jump_at: int) -> WatchRun:
    """The generator alone for 50 steps (loss 2.5, norm 4), then G and D alternate; G's
    loss rises 5.6× at its step `jump_at` (by its own count) and holds."""
    rng = random.Random(5)
    recs, step = [], 0
    for k in range(1, 121):
        noise = math.exp(rng.gauss(0, 0.05))
        loss = (14.0 if k >= jump_at else 2.5) * noise
        norm = 4.0 * math.exp(rng.gauss(0, 0.1)) * TURNS.get(k, 1.0)
        step += 1
        recs.append(step_record(step, norm=norm, loss=loss, lrs=(1e-4,), param_norms=(norm, None)))
        if k > 50:
            step += 1
            d = 5.0 * math.exp(rng.gauss(0, 0.05))
            recs.append(
                step_record(step, norm=d, loss=2.9, optimizer=1, lrs=(5e-5,), param_norms=(None, d))
            )
    return WatchRun(
        "script train_pwg.py",
        (G, D),
        tuple(recs),
        "completed",
        1.0,
        optimizers=("RAdam", "RAdam"),
        members=((0,), (1,)),
        loss_kinds=(CUSTOM, CUSTOM),
    )


def _gs403(run: WatchRun):
    (f,) = [f for f in rules.diagnose(run, Thresholds()) if f.rule == "GS403"]
    return f


def test_turns_after_the_adversarial_term_switched_on_are_the_game():
    f = _gs403(_run(jump_at=51))
    assert f.severity == Severity.INFO, f.message
    assert "its loss did not spike with its gradient" in str(f.evidence)


def test_a_loss_that_jumps_with_the_norm_and_holds_still_warns():
    assert _gs403(_run(jump_at=70)).severity == Severity.WARNING
