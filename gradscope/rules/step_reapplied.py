"""The same gradient applied at every step (GS472): no backward ran since an optimizer's
previous step and `.grad` still held the very tensors that step applied, untouched. A
gradient estimated without backward (evolution strategies, SPSA, MeZO) but written into
`.grad` only once, or a backward run once before the loop, leaves each step walking the
first step's direction again. The watcher tells it from the gradients' identity and
version counters (`StepRecord.reapplied`): no threshold decides it. No torch."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer, finite, step_list
from gradscope.steps.records import WatchRun
from gradscope.steps.step_record import StepRecord


def _retry(r: StepRecord, before: StepRecord) -> bool:
    """A step at half its previous step's learning rate or less: a backtracking line search
    written by hand steps the same gradient again from restored weights on purpose."""
    pairs = [
        (a, b)
        for a, b in zip(r.lrs, before.lrs, strict=False)
        if math.isfinite(a) and math.isfinite(b)
    ]
    return any(a * 2 <= b for a, b in pairs)


@rule(
    "GS472",
    "grads-reapplied",
    Severity.ERROR,
    "not-reset",
    Stage.WATCH,
    "watch: steps ran with no new gradient: .grad still held the gradients the previous step "
    "applied, so each step applied them again",
    example="an evolution-strategies loop that writes its estimate with `if p.grad is None: "
    "p.grad = g` and calls opt.step() every iteration: every step applies the first estimate",
    fix="write each step's gradient into .grad before step() (`p.grad = g`, or "
    "`p.grad.copy_(g)`), or run the backward inside the loop",
    objectives=(
        "any: whether .grad changed between two steps, a mechanism independent of what the "
        "loss means"
    ),
)
def grads_reapplied(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At more than half of an optimizer's steps after its first (4 at least), no backward
    ran since its previous step and every gradient in .grad was the tensor that step applied,
    unchanged (same object, same version counter): nothing wrote a new gradient, and the
    update applied the old one again. A gradient written by hand at each step (a new tensor,
    or copied into .grad in place), a closure's backward (LBFGS) and a step at half the
    previous one's learning rate or less (a backtracking line search that restores the weights
    and retries the same gradient) are not counted; nor are steps whose gradients are zero."""
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live()[1:] if finite(r.grad_norm) and r.grad_norm > 0]
        pairs = zip(s.live(), s.live()[1:], strict=False)
        retries = {r.step for before, r in pairs if _retry(r, before)}
        steps = [r for r in steps if r.step not in retries]
        again = [r for r in steps if r.reapplied]
        if len(steps) < 4 or len(again) * 2 <= len(steps):
            continue
        finding = this.finding(
            s.subject("gradients"),
            s.say(
                f"at {len(again)} of {len(steps)} steps no backward ran since the previous "
                "step and .grad still held the very gradients that step applied, unchanged: "
                "each of those steps applied the same gradient again"
            ),
            "write each step's new gradient into .grad before optimizer.step() (`p.grad = g` "
            "or `p.grad.copy_(g)` for every parameter, every step), or run loss.backward() "
            "inside the loop",
            value=len(again) / len(steps),
            threshold=0.5,
            evidence=(
                f"steps that applied their previous step's gradient: "
                f"{step_list([r.step for r in again])}",
            ),
        )
        out.append(about(finding, (r.step for r in again)))
    return out
