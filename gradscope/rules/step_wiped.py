"""Gradients wiped inside a step (GS435): a reset of the gradients between the backward
calls of one optimizer step. No torch.

`zero_grad()` (or `p.grad = None`) inside a gradient-accumulation loop leaves only the
last micro-batch's gradient for the step, so accumulation does not accumulate; the first
step (before it the watch cannot tell a warm-up from an accumulation) counts one
micro-batch's loss, every later step all of them, so the loss looks as if it rose.
The watcher sees the order of the calls (`StepRecord.wiped`): no threshold decides it.
A reset is no wipe where another optimizer keeps the gradients across it (it picks which
backward trains which optimizer: a GAN's discriminator reset after the generator's
backward, GradNorm's task weights after the weighted loss's), nor where the calls before
it kept their graph and the step's gradients were written into `.grad` by hand after the
last call (PCGrad, CAGrad: each task's gradient read, then their combination written).
Where the calls freed their graphs and the step's `.grad` was still assigned a new tensor
after the last one (simulated workers of signSGD's majority vote or of a compressed
all-reduce: each worker's gradient read before the next reset, their combination
written), the order alone cannot tell a combination from the last call's gradient
rewritten: information that says both.
"""

from __future__ import annotations

import statistics

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules import wiped_rewritten as rewritten
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer, step_list
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import StepRecord, WatchRun

SITE = "wiped"
"""`WatchRun.sites` key: where the script's first zero_grad inside a step was called."""


@rule(
    "GS435",
    "grads-wiped-in-step",
    Severity.ERROR,
    "wiped",
    Stage.WATCH,
    "watch: the gradients were reset between the backward calls of one step, so only the "
    "last micro-batch reaches each update",
    example="`for x, y in micro_batches: optimizer.zero_grad(); (loss(x, y) / 4).backward()` "
    "then `optimizer.step()`: 1 of 4 micro-batches is applied, and the loss reads a quarter "
    "of the batch's (the applied micro-batch's)",
    fix="call optimizer.zero_grad() once per step, before the accumulation loop (or right "
    "after optimizer.step()), never between its backward calls",
    supersedes=("GS430",),  # the noise scale's "reset between them" is this, said once
    objectives=(
        "any: a reset of the gradients between one step's backward calls, a mechanism "
        "independent of what the loss means"
    ),
    explains=DIVERGENCE,
)
def grads_wiped_in_step(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At more than half the steps with several backward calls, a reset of the gradients
    (zero_grad() of the optimizer or the model, or every `.grad` set to None) came between
    them: the step applied only the gradients of the calls after the last reset. Seen from
    the first step that follows a step (the first one cannot be told from backward calls
    made before training, whose gradients are thrown away on purpose), so it is named at
    step 2. Each step's loss is that of the calls it applied (after the last reset), the
    first step's as every later one's. Where each such
    update still applied as many calls as the run's usual step, nothing it would have had
    was lost: the calls reset before it were a computation between steps (a Fisher
    estimate for EWC, a gradient probe), their gradients read and thrown away.
    Not counted: resets another optimizer's gradients survive, or `.grad` set by hand follows
    calls that kept their graph; set by hand after calls that freed it, information."""
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live() if r.backward_calls > 1]
        wiped = [r for r in steps if r.wiped]
        if not wiped or len(wiped) * 2 <= len(steps) or _usual_kept(s.live(), wiped):
            continue
        calls = statistics.median(r.backward_calls for r in wiped)
        lost = statistics.median(r.wiped or 0 for r in wiped)
        where = run.sites.get(SITE)
        reset = (
            f"the gradients were reset between the backward calls of one step at "
            f"{len(wiped)} of {len(steps)} steps" + (f" (zero_grad() at {where})" if where else "")
        )
        finding = about(
            this.finding(
                s.subject("optimizer.zero_grad"),
                s.say(
                    f"the gradients were reset between the backward calls of one step "
                    f"at {len(wiped)} of {len(steps)} steps: the first {lost:g} of "
                    f"{calls:g} micro-batches were wiped before the update, which applied "
                    f"only the last {calls - lost:g}"
                    + (f" (zero_grad() at {where})" if where else "")
                ),
                "reset the gradients once per step: optimizer.zero_grad() before the "
                "accumulation loop (or right after optimizer.step()), not inside it",
                value=lost / calls,
                evidence=_evidence(s.steps[0], wiped, calls, lost),
            ),
            (r.step for r in wiped),
        )
        out.append(
            rewritten.as_information(finding, s.say(reset), lost)
            if all(r.rewritten for r in wiped)
            else finding
        )
    return out


def _evidence(
    first: StepRecord, wiped: list[StepRecord], calls: float, lost: float
) -> tuple[str, ...]:
    """The wiped steps, and the first step's count of calls where it had fewer."""
    evidence = [
        f"steps whose first backward calls were wiped: {step_list([r.step for r in wiped])}"
    ]
    if first.backward_calls < calls and first.loss is not None:
        evidence.append(
            f"step {first.step} counts {first.backward_calls} backward call(s) (loss "
            f"{num(first.loss)}), the later steps {calls:g}, each applying the last "
            f"{calls - lost:g}"
        )
    return tuple(evidence)


def _usual_kept(live: list[StepRecord], wiped: list[StepRecord]) -> bool:
    """Every wiped step applied the calls after its last reset, as many as the median step
    of the run takes: the reset dropped only calls made outside the usual step."""
    usual = statistics.median(r.backward_calls for r in live)
    return all(r.backward_calls - (r.wiped or 0) == usual for r in wiped)
