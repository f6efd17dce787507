"""A learning rate rescaled in place and never restored (GS458): AWD-LSTM's variable BPTT
sets `param_groups[0]['lr'] = lr2 * seq_len / bptt` for the batch and restores `lr2`
after the step; without the restore each batch's factor multiplies the last batch's lr,
and the lr wanders as a product of factors (to 1e-3 of its value in 50 steps, or up).
No torch.

A per-batch rescale of one base stays within the factors' own range: its spread is that of
one factor, about the largest change between two steps. Compounded, the spread grows past
the cube of that change (a margin: a short rescaled run whose extremes never meet stays
below it), while the direction keeps reversing (a schedule, a warm-up or a decay is
monotone between its turns). A wander that stays within ×2 (`RISE`, what GS452 calls a
jump) scales no update enough to matter, and online lr adaptation moves it so by design:
hypergradient descent adds β·(g_t·u_{t-1}) to the lr at every step, up and down by a
fraction of a percent."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer
from gradscope.rules.step_lr_jump import RISE
from gradscope.rules.symptoms import GROWTH
from gradscope.steps.records import StepRecord, WatchRun

MIN_STEPS = 20
"""Steps needed to tell a product of factors from a rescale of one base."""
CHANGED = 0.5
"""The lr changed at least at this share of the steps: set per batch, not by a schedule."""
REVERSED = 1 / 3
"""...and reversed its direction at this share of its changes or more (a random factor
per batch reverses about half the time; a warm-up, decay or cycle hardly ever)."""


@rule(
    "GS458",
    "lr-compounded",
    Severity.WARNING,
    "lr-drift",
    Stage.WATCH,
    "watch: a learning rate set by the script (no scheduler) changed at most steps by "
    "irregular factors and wandered further than any one factor takes it: a per-batch "
    "rescale written into param_groups and never restored",
    example="AWD-LSTM's variable BPTT without its restore: `param_groups[0]['lr'] = "
    "lr2 * seq_len / bptt` each batch and no `param_groups[0]['lr'] = lr2` after the step: "
    "lr 30 → 0.1 in 50 steps",
    fix="save the lr before rescaling it and restore it after optimizer.step(), or compute "
    "each batch's lr from the base value",
    objectives="any: the learning rate's course, a mechanism independent of what the loss means",
    explains=GROWTH,
)
def lr_compounded(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A param group's learning rate, over at least 20 steps of an optimizer no scheduler
    steps, changed at half the steps or more, reversed direction at a third of its changes
    or more (a random factor per batch, not a warm-up, decay or cycle), and spanned a range
    (largest over smallest) of 2 or more and above the cube of its largest change between
    two steps: a rescale of one base value per batch stays within about one such change,
    so the factors were multiplied into each other, the lr written back and never
    restored."""
    scheduled = {info.optimizer for info in run.schedulers}
    out = []
    for s in by_optimizer(run):
        steps = s.live()
        if s.index in scheduled or len(steps) < MIN_STEPS:
            continue
        for g in range(min(len(r.lrs) for r in steps)):
            lrs = [r.lrs[g] for r in steps]
            found = _compounded(lrs)
            if found is not None:
                out.append(about(_finding(this, s.say, s.subject("lr"), steps, g, *found), []))
                break
    return out


def _compounded(lrs: Sequence[float]) -> tuple[float, float] | None:
    """(range, largest factor between two steps) where the lrs are a product of
    irregular per-step factors; None otherwise."""
    if not all(v > 0 and math.isfinite(v) for v in lrs):
        return None
    logs = [math.log(b / a) for a, b in itertools.pairwise(lrs)]
    moves = [d for d in logs if abs(d) > 1e-9]
    if len(moves) < CHANGED * len(logs):
        return None
    reversals = sum(1 for a, b in itertools.pairwise(moves) if (a > 0) != (b > 0))
    if reversals < REVERSED * (len(moves) - 1):
        return None
    spread = max(lrs) / min(lrs)
    factor = math.exp(max(abs(d) for d in moves))
    return (spread, factor) if spread > max(factor**3, RISE) else None


def _finding(
    this: Rule,
    say: Callable[[str], str],
    subject: str,
    steps: Sequence[StepRecord],
    g: int,
    spread: float,
    factor: float,
) -> Finding:
    low = min(steps, key=lambda r: r.lrs[g])
    high = max(steps, key=lambda r: r.lrs[g])
    group = f" (param group {g})" if len(steps[0].lrs) > 1 else ""
    return this.finding(
        subject,
        say(
            f"the learning rate{group} is rescaled at most steps and the factors compound: it "
            f"spans {spread:.3g}× (from {num(high.lrs[g])} at step {high.step} to "
            f"{num(low.lrs[g])} at step {low.step}) while no change between two steps was "
            f"above ×{factor:.3g}: a per-batch rescale written into param_groups and never "
            "restored multiplies each batch's factor into the next"
        ),
        "save the lr before rescaling it and restore it after optimizer.step() "
        "(lr2 = group['lr']; group['lr'] = lr2 * factor; ...; optimizer.step(); "
        "group['lr'] = lr2), or compute each batch's lr from the base value",
        value=spread,
        threshold=factor**3,
        evidence=("lr by step: " + ", ".join(f"{r.step}: {num(r.lrs[g])}" for r in steps[:5]),),
    )
