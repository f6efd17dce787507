"""What the time-series rules share: formatting, step selection, the spike test. No torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from gradscope.config import Thresholds
from gradscope.watcher.records import StepRecord, WatchRun

MAD_SIGMA = 1.4826
"""MAD × this estimates the standard deviation of normal data."""


def finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def fmt(v: float | None) -> str:
    if v is None:
        return "none"
    return f"{v:.3g}"


def step_list(steps: Sequence[int], cap: int = 6) -> str:
    shown = ", ".join(str(s) for s in steps[:cap])
    return shown + (f" … (+{len(steps) - cap})" if len(steps) > cap else "")


def module_of(name: str) -> str:
    return name.rpartition(".")[0] or name


def live(run: WatchRun) -> list[StepRecord]:
    """Steps that updated the weights (not skipped by GradScaler)."""
    return [r for r in run.steps if not r.skipped]


def after_warmup(run: WatchRun, t: Thresholds) -> list[StepRecord]:
    return [r for r in run.steps if r.step > t.warmup_steps]


def spikes(values: Sequence[float], t: Thresholds) -> list[tuple[int, float, float]]:
    """(index, value, rolling median) of each value far above its trailing window."""
    logged = all(v > 0 for v in values)
    xs = [math.log(v) if logged else v for v in values]
    window, out = max(int(t.spike_window), 2), []
    for i in range(int(t.spike_min_history), len(xs)):
        base = xs[max(0, i - window) : i]
        med = statistics.median(base)
        sigma = MAD_SIGMA * statistics.median(abs(x - med) for x in base)
        jump = xs[i] - med
        ratio_ok = (
            jump > math.log(t.spike_min_ratio)
            if logged
            else jump > (t.spike_min_ratio - 1) * abs(med)
        )
        if jump > t.spike_sigma * sigma and ratio_ok:
            out.append((i, values[i], math.exp(med) if logged else med))
    return out
