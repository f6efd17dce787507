"""The time-series rules on fabricated runs (no torch): fire, stay silent, thresholds."""

from __future__ import annotations

import math
import statistics

import pytest
from watch_scripts import step_record

from gradscope import config
from gradscope.config import Thresholds
from gradscope.errors import ConfigError
from gradscope.rules import step_amp, step_clipping, step_setup
from gradscope.rules import step_common as rules_common
from gradscope.rules import steps as rules
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun


def record(step: int, norm: float, **kw) -> StepRecord:
    return step_record(step, norm, **kw)


def run_of(records, params=None) -> WatchRun:
    params = params or (ParamInfo("w", (4, 4), True, True, 0.1),)
    return WatchRun("t", tuple(params), tuple(records), "completed", 1.0, optimizers=("SGD",))


def calm(n: int) -> list[float]:
    return [1.0 + 0.05 * math.sin(i) for i in range(n)]


def test_spike_fires_above_and_not_at_the_ratio_floor():
    values = calm(100)
    values[80] = 10.0
    assert [i for i, _, _ in rules.spikes(values, Thresholds())] == [80]
    med = math.exp(statistics.median(math.log(v) for v in values[:80]))  # log space
    values[80] = med * 2.0 * (1 - 1e-9)  # at spike-min-ratio: not a spike
    assert rules.spikes(values, Thresholds()) == []
    values[80] = med * 2.0 * (1 + 1e-6)
    assert [i for i, _, _ in rules.spikes(values, Thresholds())] == [80]


def test_spikes_equal_the_window_median_test_at_every_step():
    """The loop skips a step not above its window's least by the ratio: the same spikes
    as judging every step by its window's median and MAD, on noisy series with spikes
    (positive: in log space; with values <= 0: linear, where a value no further above its
    last 3 steps that were no spike than the sigma test allows drifted there)."""
    import random

    t = Thresholds()
    rng = random.Random(0)

    def reference(values):
        logged = all(v > 0 for v in values)
        xs = [math.log(v) if logged else v for v in values]
        out = []
        for i in range(1, len(xs)):
            base = xs[max(0, i - int(t.spike_window)) : i]
            if i < int(t.spike_min_history) and len(base) < rules_common.EARLY_MIN_HISTORY:
                continue
            med = statistics.median(base)
            sigma = rules_common.MAD_SIGMA * statistics.median(abs(x - med) for x in base)
            early = i < int(t.spike_min_history)
            ratio = max(t.spike_early_ratio, t.spike_min_ratio) if early else t.spike_min_ratio
            jump = xs[i] - med
            big = jump > math.log(ratio) if logged else jump > (ratio - 1) * abs(med)
            spiked = {j for j, _, _ in out}
            recent = [xs[j] for j in range(i - 1, -1, -1) if j not in spiked][:3]
            drifted = recent and xs[i] - statistics.median(recent) <= t.spike_sigma * sigma
            if not logged and big and drifted:
                continue  # a signed series that drifted there from its last steps
            if jump > t.spike_sigma * sigma and big:
                out.append((i, values[i], math.exp(med) if logged else med))
        return out

    found = 0
    for n, spread in [(30, 0.05), (300, 0.1), (300, 0.4), (600, 0.02)]:
        for shift in (0.0, -1.5):
            values = [math.exp(rng.gauss(0, spread)) + shift for _ in range(n)]
            for k in rng.sample(range(n), n // 20):
                values[k] = (values[k] - shift) * rng.choice([1.5, 2.5, 10, 300]) + shift
            got = rules.spikes(values, t)
            assert got == reference(values), (n, spread, shift)
            found += len(got)
    assert found > 20


def test_first_steps_are_judged_against_their_own_history():
    values = calm(40)
    values[10] = 50.0  # before spike-min-history: against the 10 steps before it
    assert [i for i, _, _ in rules.spikes(values, Thresholds())] == [10]
    assert rules.spikes(values, Thresholds(spike_early_ratio=0)) == []  # early test off
    values[10] = 4.0  # 4×: a spike later on, not yet among the first steps (spike-early-ratio 5)
    assert rules.spikes(values, Thresholds()) == []
    values[2] = 50.0  # fewer than 3 steps of history: no median worth the name
    values[10] = 1.0
    assert rules.spikes(values, Thresholds()) == []


def test_clipping_binds_threshold():
    t = Thresholds(warmup_steps=0)
    bound = [record(i, 2.0, max_norm=1.0) for i in range(1, 11)]
    free = [record(i, 0.5, max_norm=1.0) for i in range(11, 21)]
    assert step_clipping.clipping_binds(run_of(bound + free), t) == []  # exactly half
    (f,) = step_clipping.clipping_binds(run_of(bound + free[:-1]), t)
    assert f.rule == "GS406"


def test_amp_streak_and_scale():
    t = Thresholds(warmup_steps=0, amp_skip_rate=1.0)
    recs = [record(i, 1.0, scale=2.0**10, skipped=i in (5, 6)) for i in range(1, 60)]
    assert step_amp.amp_skips(run_of(recs), t) == []
    recs[7] = record(8, 1.0, scale=0.5, skipped=True)
    recs[6] = record(7, 1.0, scale=1.0, skipped=True)
    assert [f.rule for f in step_amp.amp_skips(run_of(recs), t)] == ["GS407"]
    assert [f.rule for f in step_amp.amp_scale(run_of(recs), t)] == ["GS408"]


def test_the_scalers_opening_search_is_not_a_skip_but_skips_after_it_are():
    # init_scale 2^60: GradScaler halves it at every overflowing step until the gradients
    # fit; 30 skipped steps from step 1, the scale falling, is the search, not a fault
    t = Thresholds()
    search = [record(i, 1.0, scale=2.0 ** (61 - i), skipped=True) for i in range(1, 31)]
    assert step_amp.amp_skips(run_of(search), t) == []
    fits = [record(i, 1.0, scale=2.0**30, skipped=False) for i in range(31, 60)]
    assert step_amp.amp_skips(run_of(search + fits), t) == []
    # after the search ended, a streak of skips is judged as ever
    later = [record(i, 1.0, scale=2.0 ** (89 - i), skipped=True) for i in range(60, 75)]
    (f,) = step_amp.amp_skips(run_of(search + fits + later), t)
    assert f.rule == "GS407" and "15 in a row" in f.message
    # a search that takes the scale below 1 finds no scale at all: judged
    falling = [record(i, 1.0, scale=2.0 ** (10 - i), skipped=True) for i in range(1, 40)]
    assert [f.rule for f in step_amp.amp_skips(run_of(falling), t)] == ["GS407"]


def test_not_reset_ignores_the_first_step_and_is_a_fraction():
    recs = [record(1, 1.0)] + [record(i, 1.0, carried_norm=0.5) for i in range(2, 6)]
    (f,) = step_setup.grads_not_reset(run_of(recs), Thresholds())
    assert f.value == 1.0
    recs = [record(i, 1.0, carried_norm=0.0, backward_calls=4) for i in range(1, 10)]
    assert step_setup.grads_not_reset(run_of(recs), Thresholds()) == []


def test_skipped_amp_steps_are_not_non_finite():
    recs = [record(i, math.inf if i == 3 else 1.0, skipped=i == 3, scale=8.0) for i in range(1, 6)]
    recs[2] = record(3, math.inf, skipped=True, scale=8.0, param_norms=(math.inf,))
    assert rules.non_finite(run_of(recs), Thresholds()) == []


def test_watch_entries_validated(tmp_path):
    bad = tmp_path / "g.toml"
    bad.write_text('[[watch]]\nscript = "t.py"\nsteps = 0\n')
    with pytest.raises(ConfigError, match=r"watch\.steps"):
        config.load(str(bad), cwd=str(tmp_path))
    good = tmp_path / "ok.toml"
    good.write_text('[[watch]]\nscript = "t.py"\nargs = ["--lr", "1"]\nsteps = 3\n')
    (entry,) = config.load(str(good), cwd=str(tmp_path)).watch
    assert entry.target == "t.py" and entry.options == {"args": ["--lr", "1"], "steps": 3}
