"""An lr range test at the start of a run (fastai's lr_find, torch-lr-finder, either
step mode): the learning rate grows at every step, over decades, until the loss blows up,
then the script restores the model and optimizer it saved and trains at the learning rate
it chose. The blow-up is what the test looks for, not a fault of training: the run is
judged from the first step after the test. Where the script forgot to restore (GS460),
training starts from the weights the blow-up left, and its first losses say so. No torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun

MIN_TEST = 4
"""Steps of growth for a range test (a linear sweep over decades blows up within a few)."""

MIN_STEPS = 8
"""Steps of training after a range test, for the test to be told from the training."""

MIN_SPAN = 100.0
"""How far (×) the learning rate must grow over the test: a warm-up grows once (from
lr/25 in a one-cycle schedule), a range test sweeps decades."""

DROP = 10.0
"""How far (×) the learning rate must fall at the step after the test: training restarts
at a rate chosen below where the loss blew up; a warm-up's peak decays step by step."""

STILL = 10.0
"""The test's first steps, at rates within this factor of its first, barely move the
weights: their losses are those of the weights it started from (GS460's band)."""


def _grew(before: StepRecord, after: StepRecord) -> bool:
    """Every param group's lr, positive and finite, rose from one step to the next."""
    if not before.lrs or len(before.lrs) != len(after.lrs):
        return False
    return all(0 < a < b and math.isfinite(b) for a, b in zip(before.lrs, after.lrs, strict=True))


def _restarted(last: StepRecord, after: Sequence[StepRecord]) -> bool:
    """Training after the test ran on one optimizer at a rate DROP below the test's last:
    the test's own, its states loaded back, or a fresh one (Lightning's Tuner.lr_find
    sweeps an optimizer of its own, then Trainer.fit builds the run's from
    configure_optimizers)."""
    if len({r.optimizer for r in after}) != 1:
        return False
    if after[0].optimizer != last.optimizer:
        return bool(after[0].lrs) and max(after[0].lrs) * DROP <= min(last.lrs)
    if len(after[0].lrs) != len(last.lrs):
        return False
    return all(b * DROP <= a for a, b in zip(last.lrs, after[0].lrs, strict=True))


def range_test_end(steps: list[StepRecord]) -> int | None:
    """The number of steps a range test at the run's start took, when one did and
    training followed it; else None."""
    if len(steps) < MIN_TEST + MIN_STEPS:
        return None
    end = 1
    while (
        end < len(steps)
        and steps[end].optimizer == steps[0].optimizer
        and _grew(steps[end - 1], steps[end])
    ):
        end += 1
    first, last, after = steps[0], steps[end - 1], steps[end:]
    if end < MIN_TEST or len(after) < MIN_STEPS:
        return None
    if not all(b >= MIN_SPAN * a for a, b in zip(first.lrs, last.lrs, strict=True)):
        return None
    return end if _restarted(last, after) else None


def after_range_test(run: WatchRun) -> WatchRun:
    """The run from the first step after an lr range test at its start, the test's steps
    kept apart (the run itself when it had none)."""
    steps = list(run.steps)
    end = range_test_end(steps)
    if end is None:
        return run
    return replace(
        run,
        params=_swept_only(run, steps[0], steps[end], steps[end - 1].step),
        steps=steps[end:],
        range_test=tuple(steps[:end]),
    )


def _swept_only(
    run: WatchRun, test: StepRecord, training: StepRecord, test_end: int
) -> tuple[ParamInfo, ...]:
    """The run's parameters, those only the test's optimizer held marked as replaced when
    the test ended: Lightning's lr finder sweeps the model it is given, and a script that
    builds a new one for Trainer.fit trains that one; the swept one is no part of the
    training (in no optimizer of it, never stepped again)."""
    if test.optimizer == training.optimizer:
        return tuple(run.params)
    kept = set(run.members_of(training.optimizer))
    swept = set(run.members_of(test.optimizer)) - kept
    return tuple(
        replace(p, in_optimizer=False, lr=None, replaced_after=test_end) if i in swept else p
        for i, p in enumerate(run.params)
    )


def with_range_test_note(run: WatchRun) -> WatchRun:
    """The run, its notes saying which steps were an lr range test where it began with one."""
    note = range_test_note(run)
    return run if note is None else replace(run, notes=(*run.notes, note))


def range_test_note(run: WatchRun) -> str | None:
    """What the report says of an lr range test at the run's start; None without one."""
    steps = list(run.steps)
    end = range_test_end(steps)
    if end is None:
        return None
    last, after = steps[end - 1], steps[end]
    return (
        f"steps 1-{last.step} were an lr range test (the learning rate grew "
        f"{last.lrs[0] / steps[0].lrs[0]:.3g}× over its steps, then fell "
        f"{last.lrs[0] / after.lrs[0]:.3g}×): the rules judge its steps apart, the "
        f"training from step {after.step}"
    )


@rule(
    "GS460",
    "range-test-unrestored",
    Severity.ERROR,
    "exploding",
    Stage.WATCH,
    "watch: an lr range test blew the loss up and training went on from the weights it "
    "left, not from those it started with",
    example="an lr finder that saves model.state_dict() before its sweep and never loads it "
    "back: the real run starts from the blown-up weights",
    fix="save the model's and the optimizer's state_dict before the test and load both back "
    "after it (torch-lr-finder: lr_finder.reset())",
    objectives="any: the weights' state at the start of training, whatever the loss means",
    explains=DIVERGENCE,
)
def range_test_not_restored(
    run: WatchRun, t: Thresholds, *, this: Rule = DECLARED
) -> list[Finding]:
    """The losses of a range test's first steps, at rates within STILL of its first (too
    small to move the weights),
    are the loss of the weights it started from, batch to batch. Restored, training starts
    from those weights: its first losses lie in that band. Training that starts above it,
    after the test drove the loss above it too, starts from the weights the test left."""
    test = run.range_test
    still = [
        r for r in test if all(b <= STILL * a for a, b in zip(test[0].lrs, r.lrs, strict=True))
    ]
    band, first = _losses(still), _losses(run.steps[:3])
    if len(band) < 3 or not first:
        return []
    low, high = min(band), max(band)
    start, line = statistics.median(first), high + 2 * (high - low)
    peak, top = _peak(test)
    if top <= line or start <= line:
        return []
    at = run.steps[0].step
    message = (
        f"the lr range test of steps 1-{test[-1].step} was not undone: training from step "
        f"{at} started at loss {num(start)}, above every loss of the test's first "
        f"{len(band)} steps ({num(low)}-{num(high)}, the weights it started from), after "
        f"the test drove the loss to {num(top)} at step {peak}: the model trains on from "
        f"the weights the test left"
    )
    finding = this.finding(
        "learning-rate",
        message,
        "save model.state_dict() and optimizer.state_dict() before the test and load both "
        "back after it (torch-lr-finder: lr_finder.reset()), then train at the chosen rate",
        value=start,
        threshold=line,
        evidence=(f"losses of the first steps after the test: {', '.join(num(v) for v in first)}",),
    )
    return [about(finding, [at, peak])]


def _losses(steps: Sequence[StepRecord]) -> list[float]:
    return [r.loss for r in steps if r.loss is not None and math.isfinite(r.loss)]


def _peak(steps: Sequence[StepRecord]) -> tuple[int, float]:
    """The step of the highest loss and that loss (inf where it was not finite)."""
    worst = [
        (math.inf if r.loss is None or not math.isfinite(r.loss) else r.loss, r.step) for r in steps
    ]
    top, step = max(worst)
    return step, top
