"""Loss spikes that come back at once on a heteroscedastic NLL (a learned log-variance head,
the loss near -1.7): information whose advice spoke only of TD targets and episode ends. A
loss below 0 is a density's NLL, whose learned scale makes one far sample lift a batch: the
advice names it. A squared error's spikes keep the moving-target advice. No torch."""

from __future__ import annotations

import math
import random

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from tests.rules.test_rules_objectives import CUSTOM, MSE, rec, run_of


def _spiking(level: float, n: int = 310, every: int = 25) -> list:
    """A loss near `level` whose every `every`-th step jumps by 5 and comes back at the next,
    the gradient norm steady near 1."""
    rng = random.Random(5)
    out = []
    for s in range(1, n + 1):
        loss = level + rng.gauss(0, 0.05) + (5.0 if s % every == 0 else 0.0)
        out.append(rec(s, loss, norm=math.exp(rng.gauss(0, 0.1))))
    return out


def _spike(records, kind):
    (f,) = [f for f in rules.diagnose(run_of(records, kind), Thresholds()) if f.rule == "GS402"]
    return f


def test_a_negative_nll_s_spikes_are_information_that_names_the_learned_scale():
    f = _spike(_spiking(-1.7), CUSTOM)
    assert f.severity == Severity.INFO
    assert "likelihood whose scale is learned" in f.advice
    assert "episode ends" in f.advice


def test_a_squared_error_s_spikes_keep_the_moving_target_advice():
    f = _spike(_spiking(2.0), MSE)
    assert f.severity == Severity.INFO
    assert "likelihood" not in f.advice and "episode ends" in f.advice
