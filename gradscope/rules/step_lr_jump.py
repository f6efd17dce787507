"""A learning rate that jumps or ramps far above anything the run used (GS452). No torch.

A sudden ×10 learning rate, or a ramp of ×1.2 per step, scales every update at once
(Adam's normalised step does not absorb it): the loss diverges some steps later. The
recorded learning rates name it at the step whose update applied it, before the loss
moves. A warm-up (a rise from the first steps), a restart back to an earlier peak, a
slow schedule, a group added mid-run rising to its optimizer's other groups' rate and a
rate `load_state_dict` brought with the moments it was used with (Population-Based
Training's exploit) are not such a jump.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, When, rule
from gradscope.rules.step_common import Series, about, by_optimizer
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import StepRecord, WatchRun

PLATEAU = 16
"""Steps before the rise whose learning rates lie within FLAT of each other."""
FLAT = 1.25
RISE = 2.0
"""The rise: at least this many times the plateau's learning rate..."""
ABOVE = 1.5
"""...and this many times the highest learning rate of every step before it..."""
WITHIN = 32
"""...reached within this many steps of its start, never falling on the way."""


def lr_rise(
    lrs: Sequence[float], beside: Sequence[float] = (), loaded: Collection[int] = ()
) -> tuple[int, int] | None:
    """(start, certain): the indices of the first step of the first rise and of the step
    it reached RISE × the plateau before it; None: no such rise. `beside`: for a param
    group added mid-run, the highest rate of its optimizer's other groups at each step,
    a rate the run had used too (a backbone unfrozen at a tenth of the head's rate and
    doubled each epoch up to it, as Lightning's BackboneFinetuning does, is no jump).
    `loaded`: indices of steps before which the optimizer's state was loaded whole: the
    rate a load brought came with the moments it was used with, no rise of its own."""
    n = len(lrs)
    high = 0.0
    for j in range(PLATEAU, n):
        high = max(high, lrs[j - 1], beside[j - 1] if beside else 0.0)
        plateau = lrs[j - PLATEAU : j]
        base = max(plateau)
        if lrs[j] <= base or min(plateau) <= 0 or base > FLAT * min(plateau) or j in loaded:
            continue
        for m in range(j, min(n, j + WITHIN)):
            if m > j and lrs[m] < lrs[m - 1]:
                break
            if lrs[m] >= RISE * base and lrs[m] >= ABOVE * high:
                return j, m
    return None


def _group_rises(s: Series, loads: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
    """(group, start, certain) per param group with a rise, as indices into s.live()."""
    steps = s.live()
    groups = max((len(r.lrs) for r in steps), default=0)
    at_load = set(loads[s.index]) if s.index < len(loads) else set()
    loaded = {i for i, r in enumerate(steps) if r.step in at_load}
    out = []
    for g in range(groups):
        lrs = [r.lrs[g] if g < len(r.lrs) else 0.0 for r in steps]
        found = lr_rise(lrs, _beside(steps, g) if len(steps[0].lrs) <= g else (), loaded)
        if found is not None:
            out.append((g, *found))
    return out


def _beside(steps: Sequence[StepRecord], g: int) -> list[float]:
    """The highest learning rate of the groups other than `g` at each step."""
    return [max((lr for k, lr in enumerate(r.lrs) if k != g), default=0.0) for r in steps]


@rule(
    "GS452",
    "lr-jump",
    Severity.WARNING,
    "precursor",
    Stage.WATCH,
    "watch (precursor): the learning rate jumped or ramped, after steps at a steady rate, to "
    "several times anything the run had used; named at the step whose update applied it",
    example="lr ×10 at step 300 (a schedule's units confused, a resumed run's lr, a typo), "
    "or a ramp of ×1.2 per step",
    fix="a lower peak or a longer warm-up: check what set the learning rate at that step",
    supersedes=("GS419",),
    objectives="any: the learning rate's course, a mechanism independent of what the loss means",
    explains=DIVERGENCE,
    explains_when=When.BEFORE,
)
def lr_jump(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A param group's learning rate, after 16 steps within 1.25× of each other, rose
    without falling, within 32 steps, to at least 2 times that plateau and 1.5 times the
    highest rate of every step before: a sudden jump or a fast ramp, which scales every
    update (Adam's too) at once and makes the loss diverge some steps later. A warm-up
    from the first steps has no plateau before it; a restart returns to a peak the run
    used; a group added mid-run counts its optimizer's other groups' rates among those
    the run used (a backbone unfrozen at a tenth of the head's rate, ramped up to it); a
    rate `load_state_dict` brought came with its moments (a population member's exploit).
    Named at the step the rise was first certain: that step's update applied it. GS419's
    verdict on the first steps' rate is dropped: the harm it would read is the jump's."""
    out = []
    for s in by_optimizer(run):
        steps = s.live()
        for g, j, m in _group_rises(s, run.state_loaded):
            before, start, at = steps[j - 1], steps[j], steps[m]
            base = max(r.lrs[g] for r in steps[j - PLATEAU : j])
            factor = at.lrs[g] / base
            how = (
                f"jumped from {num(base)} to {num(at.lrs[g])} (×{factor:.1f}) at step {at.step}"
                if m == j
                else f"ramped from {num(base)} at step {before.step} to {num(at.lrs[g])} "
                f"(×{factor:.1f}) by step {at.step}, rising from step {start.step}"
            )
            group = f" (param group {g})" if len(at.lrs) > 1 else ""
            finding = this.finding(
                s.subject("lr"),
                s.say(
                    f"the learning rate{group} {how}, after {PLATEAU}+ steps at a steady "
                    f"rate: every update is that much larger from then on (precursor: the "
                    "loss diverges steps later)"
                ),
                f"check what set the learning rate at step {start.step} (a schedule's "
                "units, a resumed run's lr); if the rise is meant, use a lower peak or a "
                "longer warm-up",
                value=factor,
                threshold=RISE,
                evidence=(_trajectory(steps[j - 1 : m + 1], g), f"first certain at step {at.step}"),
            )
            out.append(about(finding, [at.step]))
            break
    return out


def _trajectory(steps: Sequence[StepRecord], g: int) -> str:
    shown = [f"{r.step}: {num(r.lrs[g])}" for r in steps]
    if len(shown) > 8:
        shown = [*shown[:4], "…", *shown[-3:]]
    return "lr by step: " + ", ".join(shown)
