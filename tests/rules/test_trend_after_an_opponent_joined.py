"""GS404 in a codec or vocoder whose discriminator joins after the generator's warm-up on
reconstruction alone (SoundStream, Parallel WaveGAN's discriminator_train_start_steps): the
generator's norm jumps to the adversarial objective's level at the discriminator's first
step and holds it. A level the new objective set is no steady rise; a norm that grows on
its own across the join, or on one side of it, still is. No torch."""

from __future__ import annotations

import math
import random

from gradscope.config import Thresholds
from gradscope.rules import watch as rules
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

G = ParamInfo("generator.weight", (8, 8), True, True, 1e-4, 0, 1.0)
D = ParamInfo("discriminator.weight", (8, 8), True, True, 5e-5, 0, 1.0)


def _run(generator_norm, joins: int = 20, steps: int = 60) -> WatchRun:
    """The generator alone until its step `joins`, then G and D alternate; G's norm at its
    k-th step is generator_norm(k) times noise."""
    rng = random.Random(3)
    recs, step = [], 0
    for k in range(1, steps + 1):
        norm = generator_norm(k) * math.exp(rng.gauss(0, 0.1))
        step += 1
        recs.append(step_record(step, norm=norm, lrs=(3e-4,), param_norms=(norm, None)))
        if k > joins:
            step += 1
            d = 5.0 * math.exp(rng.gauss(0, 0.05))
            recs.append(step_record(step, norm=d, optimizer=1, lrs=(3e-4,), param_norms=(None, d)))
    return WatchRun(
        "script train_codec.py",
        (G, D),
        tuple(recs),
        "completed",
        1.0,
        optimizers=("Adam", "Adam"),
        members=((0,), (1,)),
    )


def _gs404(run: WatchRun) -> list:
    return [f for f in rules.diagnose(run, Thresholds()) if f.rule == "GS404"]


def _level_then_wander(k: int) -> float:
    """2 on reconstruction alone, then 20 with the adversarial terms in, settling up to 40
    as the game goes on (twice its level: no explosion)."""
    return 2.0 if k <= 20 else 20.0 * (1 + (k - 20) / 40) + 8.0 * (k % 5) / 4


def test_the_level_an_opponent_set_when_it_joined_is_no_trend():
    assert _gs404(_run(_level_then_wander)) == []


def test_a_norm_that_grows_steadily_across_the_join_still_explodes():
    (f,) = _gs404(_run(lambda k: 1.06**k, joins=50, steps=100))
    assert f.value >= 10


def test_a_norm_that_grows_steadily_after_the_join_still_explodes():
    (f,) = _gs404(_run(lambda k: 2.0 if k <= 20 else 1.1 ** (k - 20)))
    assert "steps 23-" in f.message
