"""A schedule sized in optimizer steps, stepped once per epoch (GS463): OneCycleLR with
total_steps = epochs × batches per epoch, or a cosine whose T_max is the run's optimizer
steps, whose `step()` sits after the loop over batches. The run ends with the schedule a
few percent into its length: OneCycleLR never leaves its warm-up's start (max_lr / 25), a
cosine never decays. No torch.

The evidence is the schedule's own length against the run's: a schedule whose length in
calls is the number of optimizer steps the run took (to within the steps between two of
its calls) was sized in optimizer steps; one that was called at most once every other step
covered at most half of it. A schedule sized in epochs and stepped per epoch (T_max =
epochs) has a length of as many calls as the run made, far fewer than its optimizer
steps, and is not judged."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer
from gradscope.steps.meaning import SchedulerInfo
from gradscope.steps.records import WatchRun

SPARSE = 0.5
"""Calls per optimizer step at or below which the schedule covered at most half its length
by the run's end: called at most every other step."""


@rule(
    "GS463",
    "schedule-per-epoch",
    Severity.WARNING,
    "schedule-stalled",
    Stage.WATCH,
    "watch: a scheduler whose length is the run's number of optimizer steps (OneCycleLR's "
    "total_steps, a cosine's T_max) was stepped once per epoch, and ended the run a fraction "
    "into its schedule",
    example="`OneCycleLR(opt, max_lr=0.2, epochs=4, steps_per_epoch=len(loader))` with its "
    "`step()` after the loop over batches: 4 calls in a run of 128 steps, the lr stays at "
    "max_lr / 25 throughout",
    fix="call scheduler.step() after every optimizer.step(), inside the loop over batches "
    "(or size the schedule in epochs)",
    objectives=(
        "any: the scheduler's learning rate, a mechanism independent of what the loss means"
    ),
)
def schedule_stepped_per_epoch(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A scheduler sized in calls (OneCycleLR's total_steps, CosineAnnealingLR's T_max,
    LinearLR's and PolynomialLR's total_iters) whose length is the number of optimizer
    steps its optimizer took in a run that ran to its end (to within the steps between two
    of its calls: the epoch's rounding), called at most once every other optimizer step:
    it was sized in optimizer steps and stepped per epoch, and the run ended with the
    schedule a fraction of the way in. A run stopped early (--steps, a crash) has no
    length to compare."""
    if run.status != "completed":
        return []
    series = {s.index: s for s in by_optimizer(run)}
    out = []
    for info in run.schedulers:
        s = series.get(info.optimizer)
        if s is None or not s.steps or info.shape != "ends" or info.horizon is None:
            continue
        taken = s.steps[-1].step
        length = _length(info)
        if info.calls < 2 or info.per_step > SPARSE or info.calls >= length:
            continue
        if abs(length - taken) <= taken / info.calls:
            out.append(about(_finding(s, info, length, taken), [s.steps[-1].step]))
    return out


def _length(info: SchedulerInfo) -> int:
    """The schedule's length in calls: OneCycleLR's total_steps (its horizon is the last
    call it allows), the others' T_max or total_iters."""
    assert info.horizon is not None
    return info.horizon + 1 if info.kind == "OneCycleLR" else info.horizon


def _finding(s: Series, info: SchedulerInfo, length: int, taken: int) -> Finding:
    first, last = s.steps[0], s.steps[-1]
    lrs = ""
    if first.lrs and last.lrs:
        lrs = f"; param group 0's lr went from {num(first.lrs[0])} to {num(last.lrs[0])}"
    where = f" at {info.site}" if info.site else ""
    every = (info.last - info.first) / (info.calls - 1)
    return RULES["GS463"].finding(
        s.subject(info.kind),
        s.say(
            f"{info.describe()} is {length} calls long, the {taken} optimizer steps the run "
            f"took, but was stepped {info.calls} times{where}, once every {every:.3g} "
            f"optimizer steps: the run ended {info.calls / length:.0%} into its schedule{lrs}"
        ),
        _advice(info),
        value=info.per_step,
        threshold=SPARSE,
        evidence=(
            f"{info.calls} scheduler.step() calls over optimizer steps {info.first}-{info.last}",
            f"{info.kind}'s length: {length} calls; the run: {taken} optimizer steps",
        ),
    )


def _advice(info: SchedulerInfo) -> str:
    if info.stepper == "lightning":
        return (
            f'{info.kind} here counts optimizer steps: return it with "interval": "step" in '
            "configure_optimizers' lr_scheduler dict (Lightning's default is \"epoch\")"
        )
    return (
        f"{info.kind} here counts optimizer steps: call scheduler.step() after every "
        "optimizer.step(), inside the loop over batches (or size it in epochs)"
    )
