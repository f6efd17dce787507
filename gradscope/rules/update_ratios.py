"""Which update/weight ratios GS409 and GS410 judge: each parameter's median over the
sampled steps where it had a gradient while its learning rate was above 0. No torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator

from gradscope.config import Thresholds
from gradscope.rules.short_lived import short_lived
from gradscope.rules.step_common import after_warmup, by_optimizer
from gradscope.steps.records import WatchRun


def _median_ratios(run: WatchRun, t: Thresholds, with_grad: bool) -> dict[int, float]:
    """Median sampled update/weight ratio per parameter; `with_grad`: only over the
    sampled steps where that parameter had a non-zero gradient. Not over the steps of an
    optimizer built for one task or round (`short_lived`): its large moves are its purpose."""
    brief = short_lived(run, t)
    sampled = [
        r
        for r in after_warmup(run, t)
        if r.update_ratios is not None and not r.skipped and r.optimizer not in brief
    ]
    out = {}
    for i in range(len(run.params)):
        vals = [
            r.update_ratios[i]
            for r in sampled
            if r.update_ratios is not None
            and (not with_grad or (r.param_norms[i] or 0) > 0)
            and not math.isnan(r.update_ratios[i])
        ]
        if vals:
            out[i] = statistics.median(vals)
    return out


def had_lr(run: WatchRun, t: Thresholds, i: int) -> bool:
    """Its param group's learning rate was above 0 at a step of its optimizer after warmup
    (the steps its ratios are judged over). The lr read at the end is not enough: a schedule
    that decays to 0 (a linear decay's last scheduler.step(), after the last update) leaves
    a 0 that no step used."""
    p = run.params[i]
    if p.group is None:
        return p.lr != 0
    series = next((s for s in by_optimizer(run) if i in s.members), None)
    steps = [r for r in series.steps if r.step > t.warmup_steps] if series is not None else []
    if not steps:
        return p.lr != 0
    return any(len(r.lrs) > p.group and r.lrs[p.group] > 0 for r in steps)


def judged_ratios(run: WatchRun, t: Thresholds) -> Iterator[tuple[int, float, bool]]:
    """(parameter, its median update ratio, whether it is a matrix) for the parameters in
    an optimizer: over the steps where it had a gradient when it could learn (a sampled
    path of a supernet gets none at most steps, and no optimizer moves it then)."""
    every = _median_ratios(run, t, with_grad=False)
    graded = _median_ratios(run, t, with_grad=True)
    for i, ratio in every.items():
        p = run.params[i]
        if not p.in_optimizer:
            continue
        if p.requires_grad and had_lr(run, t, i):
            if i not in graded:
                continue
            ratio = graded[i]
        yield i, ratio, len(p.shape) >= 2 and not (p.optimised_input or p.sampled_grid)
