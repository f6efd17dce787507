"""GS410 told where Adam's eps swallowed the gradient: Adam's step on an element is
lr·m̂/(√v̂+eps), so a tensor whose whole gradient stays below eps moves by about
lr·g/eps, a ratio of ~0 whatever its learning rate. The gradient vanished before the
layer (units saturated: pytorch-forecasting feeds the target back as an input, and left
unnormalised, at 1e4, it saturates an LSTM's gates, whose first layer then gets
1e-16..1e-20), so raising the lr is the wrong fix. No torch."""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding
from gradscope.fmt import num
from gradscope.rules.update_ratios import had_lr
from gradscope.steps.records import WatchRun


def told(run: WatchRun, t: Thresholds, i: int, finding: Finding) -> Finding:
    """GS410's `finding` on tensor i, said as a gradient below Adam's eps where it was
    (under a learning rate above 0: a rate of 0 is the finding's own cause)."""
    under = _under_eps(run, i) if had_lr(run, t, i) else None
    if under is None:
        return finding
    eps, peak = under
    moved = "not updated" if finding.value == 0 else "barely updated"
    return replace(
        finding,
        message=(
            f"{run.params[i].name} is {moved}: its gradient's norm never rose above "
            f"{num(peak)}, below Adam's eps {num(eps)}, so each step is about lr·g/eps ≈ 0: "
            "the gradient vanished before this layer, not its learning rate"
        ),
        advice=(
            "look for saturated units feeding it (inputs far from unit scale: a target or "
            "feature left unnormalised); a larger learning rate does not help"
        ),
    )


def _under_eps(run: WatchRun, i: int) -> tuple[float, float] | None:
    """(eps, the largest gradient norm) where tensor i's optimizer is Adam-like and every
    gradient it got stayed below its group's eps; None otherwise."""
    k = next((k for k in sorted(run.store.optimizers()) if i in run.members_of(k)), None)
    settings = None if k is None else run.settings_of(k)
    group = run.params[i].group or 0
    if settings is None or settings.update != "adam" or group >= len(settings.groups):
        return None
    eps = settings.groups[group].eps
    norms = [
        v
        for r in run.steps
        if i < len(r.param_norms) and (v := r.param_norms[i]) is not None and math.isfinite(v)
    ]
    if not eps or not norms or max(norms) >= eps:
        return None
    return eps, max(norms)
