"""A clip that no step applies (GS457): `clip_grad_norm_` called before the backward (on
the previous step's gradients, which the next zero_grad clears, or on none) or after
`optimizer.step()`, so every step applies the raw gradients. The watcher sees the order
of the calls (`WatchRun.unused_clips`); the steps' own norms say whether the clip would
have cut them. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.in_backward import optimizers_in_backward
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, finite, step_list
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import StepRecord, UnusedClip, WatchRun


@rule(
    "GS457",
    "clip-not-applied",
    Severity.WARNING,
    "clip-order",
    Stage.WATCH,
    "watch: clip_grad_norm_ ran where no optimizer step applied what it clipped (before the "
    "backward or after the step), so the steps applied unclipped gradients above its max_norm",
    example="`clip_grad_norm_(model.parameters(), 0.25)` at the top of the loop, before "
    "`loss.backward()`: it clips the previous step's gradients, which zero_grad then clears",
    fix="call clip_grad_norm_ after loss.backward() and before optimizer.step()",
    objectives=(
        "any: the order of the script's clip, backward and step calls, a mechanism "
        "independent of what the loss means"
    ),
    explains=DIVERGENCE,
)
def clip_not_applied(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A line of the script called clip_grad_norm_ with a finite max_norm at least at
    half the steps of the optimizers whose parameters it touched, each time with no
    backward since the last step and no step before the next backward (before the
    backward, or after the step): what it clipped was the previous step's gradients (or
    none), and the step after the next backward applied gradients no clip saw. It is named
    only where those steps were really left unbounded: most of them had no clip of their
    own (a norm taken for a log after a real clip loses nothing) and some had a norm above
    its max_norm (a clip that would never have cut is a no-op wherever it stands)."""
    out = []
    for s in by_optimizer(run):
        for clip in run.unused_clips:
            above = _unbounded(s, clip)
            if above:
                found = _finding(this, s, clip, above)
                if optimizers_in_backward(run):
                    found = _in_backward(found, clip)
                out.append(about(found, (r.step for r in above)))
    return out


def _unbounded(s: Series, clip: UnusedClip) -> list[StepRecord]:
    """The steps of `s` the clip left above its max_norm, when it is this optimizer's
    (touches its parameters, ran at half its steps or more) and most steps had no clip."""
    steps = s.live()
    if not steps or (clip.positions and not set(clip.positions) & set(s.members)):
        return []
    unclipped = [r for r in steps if r.max_norm is None]
    if clip.count * 2 < len(steps) or len(unclipped) * 2 <= len(steps):
        return []
    return [r for r in unclipped if finite(r.grad_norm) and r.grad_norm > clip.max_norm]


def _in_backward(found: Finding, clip: UnusedClip) -> Finding:
    """Told for an optimizer in backward: each step ran as its gradient landed, inside the
    backward, and released it; no line between the backward and the steps exists."""
    return replace(
        found,
        message=f"{found.message}; the optimizers step inside the backward (a "
        "post-accumulate-grad hook per parameter), which applies and releases each gradient "
        "before the clip runs: it sees none",
        advice="bound each gradient inside the hook, before its optimizer steps (a "
        "per-parameter clip_grad_norm_ or clip_grad_value_), or step the optimizers after "
        f"loss.backward() to clip the total norm (the clip is at {clip.site})",
    )


def _finding(this: Rule, s: Series, clip: UnusedClip, above: list[StepRecord]) -> Finding:
    top = max(above, key=lambda r: r.grad_norm)
    return this.finding(
        s.subject("clip_grad_norm_"),
        s.say(
            f"clip_grad_norm_(max_norm={num(clip.max_norm)}) at {clip.site} ran "
            f"{clip.count} times with no backward since the last step and no step before "
            "the next backward: it clipped gradients no step applied (the previous step's, "
            f"or none), and {len(above)} of these steps applied gradients above its "
            f"max_norm (up to {num(top.grad_norm)} at step {top.step})"
        ),
        f"call clip_grad_norm_ after loss.backward() and before optimizer.step() (it is at "
        f"{clip.site})",
        value=float(len(above)),
        threshold=clip.max_norm,
        evidence=(f"unclipped steps above max_norm: {step_list([r.step for r in above])}",),
    )
