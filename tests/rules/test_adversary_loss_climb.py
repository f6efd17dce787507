"""GS402 on an adversary's loss in adversarial debiasing (Zhang et al.): an adversary
predicts the protected attribute from the predictor's output, and the predictor minimises
its own loss minus alpha times the adversary's. As the predictor learns to hide the
attribute, the adversary's cross-entropy climbs by design: its level says nothing alone,
so a climb the rolling median lags is no spike. The same climb where nothing ascends the
adversary's loss, and a corrupted batch in the game, still warn. No torch."""

from __future__ import annotations

import math
import random

import pytest

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

PREDICTOR = ParamInfo("clf.weight", (8, 8), True, True, 1e-3, 0, 1.0)
ADVERSARY = ParamInfo("adv.weight", (8, 1), True, True, 1e-3, 0, 1.0)


BINARY = "binary_cross_entropy_with_logits"


def _term(kind: str, factor: float = 1.0) -> LossTerm:
    return LossTerm(kind, "mean", factor, classes=2 if kind == BINARY else 4, count=64)


def _run(predictor_sign: float, corrupted: int | None = None, kind: str = BINARY) -> WatchRun:
    """300 iterations, the adversary stepping first: its loss at 0.5 (noise 5%) for 150,
    then climbing to 1.0 over 15 iterations and swinging there (noise 20%); the predictor's
    loss is its cross-entropy plus `predictor_sign` times the adversary's (of `kind`)."""
    rng = random.Random(3)
    recs, step = [], 0
    for k in range(300):
        level = 0.5 + 0.5 * min(1.0, max(0.0, (k - 150) / 15))
        adv = (
            level
            * math.exp(rng.gauss(0, 0.05 if k < 150 else 0.2))
            * (30.0 if k == corrupted else 1.0)
        )
        norm = 0.3 * math.exp(rng.gauss(0, 0.2))
        step += 1
        recs.append(
            step_record(
                step, norm=norm, loss=adv, optimizer=1, lrs=(1e-3,), param_norms=(None, norm)
            )
        )
        step += 1
        loss = 0.4 * math.exp(rng.gauss(0, 0.1)) + predictor_sign * adv
        recs.append(step_record(step, norm=norm, loss=loss, lrs=(1e-3,), param_norms=(norm, None)))
    return WatchRun(
        "script debias.py",
        (PREDICTOR, ADVERSARY),
        tuple(recs),
        "completed",
        1.0,
        optimizers=("Adam", "Adam"),
        members=((0,), (1,)),
        loss_kinds=(
            LossKind((_term(BINARY), _term(kind, predictor_sign))),
            LossKind((_term(kind),)),
        ),
    )


def _adversary_spikes(run: WatchRun):
    found = rules.diagnose(run, Thresholds())
    return [f for f in found if f.rule == "GS402" and "optimizer 1" in f.subject]


@pytest.mark.parametrize("kind", [BINARY, "cross_entropy"])
def test_the_adversarys_loss_climbing_as_the_predictor_subtracts_it_is_no_spike(kind):
    assert _adversary_spikes(_run(-1.0, kind=kind)) == []


def test_the_same_climb_where_nothing_ascends_it_still_warns():
    (f,) = _adversary_spikes(_run(+1.0))
    assert f.severity == Severity.WARNING


def test_a_corrupted_batch_of_the_adversary_in_the_game_still_warns():
    (f,) = _adversary_spikes(_run(-1.0, corrupted=240))
    assert f.severity == Severity.WARNING and 481 in f.steps
