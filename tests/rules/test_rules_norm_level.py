"""A gradient norm that moves to a new, noisy level while the loss falls, on fabricated runs
(no torch): a likelihood whose learned scale sharpens (DeepAR's Gaussian NLL: the gradient
grows as 1/sigma² as sigma shrinks, from ~1 to 15-55 in 15 steps), an ensemble's log-variance
tightening (PETS: 0.17 to 0.7 over 100 steps). The rolling median lags the new level by its
whole window; the new level's steps are no spikes (GS403). A corrupted batch on the new
level, a level the loss rose with, or one that ended in NaN still warn."""

from __future__ import annotations

import math
import random

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from tests.rules.test_rules_objectives import CUSTOM, rec, run_of

T = Thresholds()


def _spikes(records) -> list:
    return [f for f in rules.diagnose(run_of(records, CUSTOM), T) if f.rule == "GS403"]


def sharpening(n=200, onset=130, level=15.0, odd=None, loss_rises=False, nan_at=None):
    """DeepAR-like: the norm near 1, then from `onset` a level `level`× as noisy (sigma 0.6 in
    log) while the loss goes on falling; `odd`: a step 1000× (loss and norm: a corrupted
    batch); `loss_rises`: the loss climbs from `onset` (a blow-up); `nan_at`: a NaN loss."""
    rng = random.Random(5)
    out = []
    for s in range(1, n + 1):
        loss = 3.0 - 0.01 * s + rng.gauss(0, 0.05)
        norm = math.exp(rng.gauss(0, 0.3))
        if s >= onset:
            norm *= level * math.exp(rng.gauss(0, 0.6))
            loss += 0.05 * (s - onset) if loss_rises else 0.0
        if s == odd:
            loss, norm = loss * 1000, norm * 1000
        out.append(rec(s, float("nan") if s == nan_at else loss, norm=norm))
    return out


def tightening(n=300, peaks=(110, 113)):
    """PETS-like: the norm creeps from 0.17 to 0.25 over 50 quiet steps, climbs to 0.7
    between steps 80 and 95 and holds there, noisier (sigma 0.3 in log), with two steps 2.5×
    the level, while the loss falls."""
    rng = random.Random(7)
    out = []
    for s in range(1, n + 1):
        base = 0.17 + 0.08 * min(s, 50) / 50 + 0.45 * min(max(s - 80, 0), 15) / 15
        norm = base * math.exp(rng.gauss(0, 0.03 if s < 80 else 0.3))
        norm *= 2.5 if s in peaks else 1.0
        out.append(rec(s, 0.8 - 0.006 * s + rng.gauss(0, 0.05), norm=norm))
    return out


def test_a_norm_that_moves_to_a_noisy_new_level_while_the_loss_falls_is_no_spike():
    for level in (8.0, 15.0, 40.0):
        assert _spikes(sharpening(level=level)) == [], level


def test_a_norm_that_climbs_to_a_level_with_peaks_of_its_own_is_no_spike():
    assert _spikes(tightening()) == []


def test_a_corrupted_batch_on_the_new_level_is_still_named():
    for odd in (150, 185, 60):
        (f,) = _spikes(sharpening(odd=odd))
        assert f.severity == Severity.WARNING and f"step {odd} reached" in f.message, odd
        assert f.steps == (odd,), (odd, f.steps)
        # told against the level its neighbours sit at, not only the lagging median
        assert ("a level the rolling median lags" in f.message) == (odd > 130), f.message


def test_a_new_level_the_loss_rose_with_still_warns():
    (f,) = _spikes(sharpening(loss_rises=True))
    assert f.severity == Severity.WARNING


def test_a_new_level_that_ended_in_nan_still_warns():
    (f,) = _spikes(sharpening(nan_at=199))
    assert f.severity == Severity.WARNING
