"""A learning rate that collapses (GS436): a scheduler stepped per batch (or per
micro-batch) whose schedule counts epochs, so the lr reaches ~0 early in the run. No torch.

The watcher counts each scheduler's step() calls against its optimizer's steps
(watcher/schedules.py); each step's lr is in `StepRecord.lrs`. A schedule meant per step
(a cosine over the total steps, OneCycleLR, a linear decay to 0) reaches its end with the
run; one meant per epoch and stepped per batch reaches it after a few epochs' worth of
batches, and the run goes on at no learning rate. Which of the two a collapse is follows
from the scheduler's class and numbers (SchedulerInfo.shape), at the step it happens: no
wait for the run's end.
"""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer
from gradscope.steps.meaning import SchedulerInfo
from gradscope.steps.records import StepRecord, WatchRun

COLLAPSED = 0.01
"""The lr at or below 1% of its peak: the schedule's end, by the issue's own measure."""
LONGER = 2
"""For a schedule that does not say where it ends: one whose lr only falls (StepLR,
MultiStepLR, ExponentialLR) or of unknown shape (a lambda, a composite). Step recipes keep
up to a third of the run at 1% of the peak or below: ResNet's ×0.1 at 32k and 48k of 64k
iterations (a quarter), ImageNet's StepLR(30) over 90 epochs (a third), detection's ×0.1 at
78% and 93% (7%); a schedule counted in epochs and stepped per batch collapses after a few
epochs' worth of batches, and the run trains on many times as long. So a collapse is the
run's once the run has spent LONGER times as many steps since the schedule's first call as
it took to fall there: it trained on below 1% for as long (at least 2 steps)."""
CYCLIC = ("CosineAnnealingWarmRestarts", "CyclicLR")
"""Schedules that return to their peak by design: the lr near 0 is a restart's eve."""


@rule(
    "GS436",
    "lr-collapsed",
    Severity.WARNING,
    "schedule",
    Stage.WATCH,
    "watch: a scheduler stepped at every optimizer step (or micro-batch) took the learning "
    "rate below 1% of its peak long before the run ended",
    example="`StepLR(optimizer, step_size=10, gamma=0.1)` meant per epoch, its `step()` "
    "inside the loop over batches: the lr is 1% of its peak at step 21 and the loss stalls",
    fix="call scheduler.step() once per epoch, after the loop over batches (or size the "
    "schedule in optimizer steps); once per optimizer step, never per micro-batch",
    supersedes=("GS419",),  # a per-micro-batch schedule's first steps are not the lr's fault
    objectives=(
        "any: the scheduler's learning rate, a mechanism independent of what the loss means"
    ),
    explains=("GS405", "GS410", "GS413", "GS415", "GS417"),
)
def lr_collapsed(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A scheduler (not a cyclic one: CosineAnnealingWarmRestarts, CyclicLR) was stepped at
    least once per optimizer step, and a param group's lr fell to 1% of its peak so far or
    below while the run went on. Whether it went on by design is the schedule's own: one
    sized in calls (CosineAnnealingLR's T_max, LinearLR's and PolynomialLR's total_iters,
    OneCycleLR's total_steps) reaches 1% near its own end, and is a collapse once the run
    steps past that end; any other (one whose lr only falls, which a recipe may take to 1%
    near the run's end; a lambda, a composite) is a collapse once the run trains on below 1%
    for as long as it took to fall there (recipes keep at most a third of the run there;
    a lambda whose lr climbs back above 1% before then restarted by design). A
    schedule counted in epochs, stepped per batch, ends after as many batches as it has
    epochs; one stepped per micro-batch ends K times too early. The finding names the
    scheduler, its numbers, the line that steps it and the step where the lr fell below
    1%."""
    out = []
    series = {s.index: s for s in by_optimizer(run)}
    for info in run.schedulers:
        s = series.get(info.optimizer)
        if s is None or info.kind in CYCLIC or info.per_step < 0.9:
            continue
        found = _held_collapse(info, s.live())
        if found is None:
            continue
        peak, at, group = found
        last = s.steps[-1].step
        if last < _due(info, at.step):
            continue
        out.append(about(_finding(s, info, peak, at, group, last - at.step), [at.step]))
    return out


def _held_collapse(
    info: SchedulerInfo, steps: list[StepRecord]
) -> tuple[StepRecord, StepRecord, int] | None:
    """The first collapse the lr did not climb back out of before it was due. A schedule of
    unknown shape (a lambda, a composite) may restart by design: ReLoRA's jagged cosine and
    SGDR-style lambdas take the lr to 0 at each restart and warm it up again within a few
    steps. A dip the lr rose back above 1% of its peak from is such a restart, not the end
    of the run's learning; a schedule counted in epochs and stepped per batch stays down."""
    start = 0
    while (found := _collapse(steps[start:])) is not None:
        peak, at, group = found
        if info.shape:
            return found  # "falls" stays down; "ends" is judged by its own horizon
        due = _due(info, at.step)
        risen = next(
            (
                i
                for i, r in enumerate(steps)
                if at.step < r.step <= due
                and r.lrs[group] > peak.lrs[group] * COLLAPSED * (1 + 1e-9)
            ),
            None,
        )
        if risen is None:
            return found
        start = risen
    return None


def _due(info: SchedulerInfo, at: int) -> float:
    """The step from which a collapse at step `at` is certain to be the run's, not the
    schedule's planned end (inf: never, for a schedule the run has not outlived)."""
    if info.shape == "ends":
        return math.inf if info.past is None else max(at + 1, info.past)
    return at + max(2, (LONGER - 1) * (at - info.first + 1))


def _collapse(steps: list[StepRecord]) -> tuple[StepRecord, StepRecord, int] | None:
    """The step whose lr first fell to COLLAPSED of its peak so far (any group), with the
    peak's step and the group."""
    peaks: dict[int, StepRecord] = {}
    for r in steps:
        for g, lr in enumerate(r.lrs):
            peak = peaks.get(g)
            if peak is None or lr > peak.lrs[g]:
                peaks[g] = r
            elif peak.lrs[g] > 0 and lr <= peak.lrs[g] * COLLAPSED * (1 + 1e-9):
                return peak, r, g
    return None


def _finding(
    s: Series, info: SchedulerInfo, peak: StepRecord, at: StepRecord, group: int, after: int
) -> Finding:
    pace = (
        f"{info.per_step:.3g} calls per optimizer step: per micro-batch"
        if info.per_step > 1.5
        else "once per optimizer step"
    )
    where = f" at {info.site}" if info.site else ""
    loss = f"; the loss was {num(at.loss)} there" if at.loss is not None else ""
    return RULES["GS436"].finding(
        s.subject(info.kind),
        s.say(
            f"the learning rate collapsed: {info.describe()}, stepped {pace}{where}, took "
            f"param group {group}'s lr from {num(peak.lrs[group])} (step {peak.step}) to "
            f"{num(at.lrs[group])} at step {at.step}, below 1% of its peak, and the run "
            f"trained {after} more steps{loss}"
        ),
        _advice(info),
        value=at.lrs[group] / peak.lrs[group],
        threshold=COLLAPSED,
        evidence=(
            f"{info.calls} scheduler.step() calls over optimizer steps {info.first}-{info.last}",
            *_shape_evidence(info),
        ),
    )


def _advice(info: SchedulerInfo) -> str:
    """The fix where the script steps the scheduler, or where Lightning's loop does."""
    if info.per_step > 1.5:
        return (
            "call scheduler.step() once per optimizer step, after optimizer.step(), not per "
            "micro-batch"
        )
    if info.stepper == "lightning":
        return (
            f"{info.kind} here counts epochs: in configure_optimizers, return it with "
            '"interval": "epoch" (Lightning\'s default) in its lr_scheduler dict, not "step"; '
            "or size its schedule in optimizer steps (× batches per epoch)"
        )
    return (
        f"{info.kind} here counts epochs: call scheduler.step() once per epoch, after the loop "
        "over batches; or size its schedule in optimizer steps (× batches per epoch)"
    )


def _shape_evidence(info: SchedulerInfo) -> tuple[str, ...]:
    """What made the collapse certain at its step: the schedule's own shape."""
    if info.shape == "falls":
        return (
            f"{info.kind}'s lr only falls: it stays below 1% of its peak from there, and the "
            "run trained on below it for as long as it took to fall there",
        )
    if info.shape == "ends" and info.past is not None:
        return (
            f"{info.kind} ends after {info.horizon} calls; the run went past that end "
            f"at step {info.past}",
        )
    return ()
