"""GS488: a learning rate below zero. torch's optimizers refuse a negative lr when built, but
not one a schedule or the script writes into a param group later, and their step then
moves each weight up its gradient: the run ascends the loss it means to lower. The usual
way there is a linear decay written as a lambda, `1 - step / total`, stepped past `total`
(a run longer than the schedule was sized for); another is an lr the script adapts itself
(hypergradient descent) with its update's sign flipped. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, finite
from gradscope.rules.symptoms import GROWTH
from gradscope.steps.meaning import SchedulerInfo
from gradscope.steps.records import StepRecord, WatchRun


@rule(
    "GS488",
    "lr-negative",
    Severity.ERROR,
    "schedule",
    Stage.WATCH,
    "watch: a param group's learning rate went below zero, so the optimizer's steps ascend "
    "the loss",
    example="`LambdaLR(optimizer, lambda s: 1 - s / total)` with the run going past `total` "
    "steps: the lr is negative from step total + 1 and the loss climbs back",
    fix="clamp the schedule at 0 (`max(0.0, 1 - s / total)`) or size it to the run's "
    "optimizer steps; torch's LinearLR and PolynomialLR stop at their end. To ascend a loss "
    "on purpose, keep the lr positive and pass maximize=True",
    supersedes=("GS436",),  # a negative lr is below 1% of its peak; its sign is the cause
    objectives=(
        "any: the sign of the optimizer's learning rate, a mechanism independent of what "
        "the loss means"
    ),
    explains=GROWTH,
)
def lr_negative(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A param group of an optimizer whose step gradscope knows (torch's classes, Adam's
    family, Lion, Prodigy: lr multiplies a step taken down the gradient) had a negative lr
    at an optimizer step. An error where the same group stepped at a positive lr before:
    the run descended, then turned to ascend (a schedule decayed past its end, an lr adapted
    by hand across 0); a warning where it was negative from the first step (an ascent set
    by hand, which maximize=True says plainly). The finding names the group, the step, the
    scheduler that set it where one schedules this optimizer, and the loss since."""
    out = []
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        if s.manual(run) or settings is None or not settings.update:
            continue
        found = _first_negative(s.live())
        if found is None:
            continue
        before, at, group = found
        schedulers = [i for i in run.schedulers if i.optimizer == s.index]
        finding = this.finding(
            s.subject(f"param group {group}"),
            s.say(_message(s, before, at, group, schedulers)),
            _advice(schedulers),
            value=at.lrs[group],
            threshold=0.0,
            evidence=_evidence(s, at, group, schedulers),
        )
        if before is None:
            finding = replace(finding, severity=Severity.WARNING)
        out.append(about(finding, [at.step]))
    return out


def _first_negative(
    steps: list[StepRecord],
) -> tuple[StepRecord | None, StepRecord, int] | None:
    """The first step with a negative lr in some group, with that group's last step at a
    positive lr before it (None: it never had one)."""
    last_positive: dict[int, StepRecord] = {}
    for r in steps:
        for g, lr in enumerate(r.lrs):
            if lr < 0:
                return last_positive.get(g), r, g
            if lr > 0:
                last_positive[g] = r
    return None


def _message(
    s: Series,
    before: StepRecord | None,
    at: StepRecord,
    group: int,
    schedulers: list[SchedulerInfo],
) -> str:
    by = f" ({_named(schedulers[0])})" if schedulers else " (set by the script)"
    turn = (
        f"from {num(before.lrs[group])} at step {before.step} to {num(at.lrs[group])} at step "
        f"{at.step}"
        if before is not None
        else f"{num(at.lrs[group])} from the first step ({at.step})"
    )
    after = [r for r in s.live() if r.step >= at.step]
    losses = [r.loss for r in s.live() if r.step < at.step and r.loss is not None]
    end = after[-1].loss
    climb = (
        f"; the loss was {num(min(losses))} at its lowest before and {num(end)} at the end"
        if losses and finite(min(losses)) and finite(end)
        else ""
    )
    return (
        f"param group {group}'s learning rate went negative{by}: {turn}. A negative lr "
        f"steps up the gradient, so the optimizer ascended the loss for {len(after)} "
        f"step(s){climb}"
    )


def _named(info: SchedulerInfo) -> str:
    return info.describe() if info.settings else info.kind


def _advice(schedulers: list[SchedulerInfo]) -> str:
    if schedulers:
        return (
            f"{schedulers[0].kind} took the lr below 0: clamp its factor at 0 (`max(0.0, 1 - "
            "step / total)`) or size it to the run's optimizer steps (epochs × batches per "
            "epoch ÷ accumulation); torch's LinearLR and PolynomialLR stop at their end"
        )
    return (
        "the script wrote a negative lr into the param group (an lr it adapts itself, or a "
        "schedule of its own): keep it at 0 or above (check the sign of its update); to "
        "ascend a loss on purpose, keep the lr positive and pass maximize=True"
    )


def _evidence(
    s: Series, at: StepRecord, group: int, schedulers: list[SchedulerInfo]
) -> tuple[str, ...]:
    negative = sum(1 for r in s.live() if group < len(r.lrs) and r.lrs[group] < 0)
    lines = [f"{negative} optimizer step(s) at a negative lr in param group {group}"]
    lines += [
        f"{i.kind} stepped {i.calls} times over optimizer steps {i.first}-{i.last}"
        + (f" at {i.site}" if i.site else "")
        for i in schedulers
    ]
    return tuple(lines)
