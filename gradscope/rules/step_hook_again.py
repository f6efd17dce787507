"""A gradient hook registered again on a tensor that still holds the last one (GS470): each
backward passes the gradient through every live hook of the tensor in turn, so a hook
that changes it is applied once per registration. A DEQ's implicit backward
(`z.register_hook(backward_hook)`, the hook returning the adjoint fixed point's solution)
registered twice solves twice, and the gradient it passes on belongs to another equation;
registered each forward on a tensor that persists, the hooks pile up step after step. The
watcher reads, at each `Tensor.register_hook` of the script's own function, the live hooks
the tensor already holds (watcher/hooks_again.py). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, step_list
from gradscope.steps.records import WatchRun


@rule(
    "GS470",
    "hook-registered-again",
    Severity.WARNING,
    "hook-again",
    Stage.WATCH,
    "watch: a gradient hook registered on a tensor that still held a live hook of the same "
    "function: every backward applies it once per registration",
    example="a DEQ's `z.register_hook(backward_hook)` called twice on the same z, or each "
    "forward on a tensor that persists, without `handle.remove()`",
    fix="register the hook once per tensor; keep the handle and call handle.remove() (inside "
    "the hook, as the DEQ tutorial does) before registering it again",
    objectives="any: how the script registers its hooks, a mechanism independent of the loss",
)
def hook_registered_again(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At a `Tensor.register_hook` call of the script, with a function of its own, the
    tensor already held a live hook of that same function (one never removed): the
    backward runs both, each on what the other returned, so a hook that changes the
    gradient (a DEQ's adjoint solve, a scaling, a clip) is applied twice. Hooks of
    different functions on one tensor, and the same function on fresh tensors each
    forward, are what hooks are for: silent."""
    found = run.hook_again
    if found is None:
        return []
    finding = this.finding(
        "register_hook",
        f"at step {found.step} the script registered `{found.hook}` at {found.site} on a "
        "tensor that still held a live hook of that same function (never removed): each "
        "backward passes the gradient through every registration in turn, so what the hook "
        f"does to it is done {found.most} times (a DEQ's implicit backward solves its "
        "adjoint again on its own answer; a scaling compounds)",
        f"register `{found.hook}` once per tensor: keep the handle register_hook returns and "
        "call handle.remove() (inside the hook, as the DEQ tutorial does) before registering "
        "it again",
        value=float(found.most),
        evidence=(
            f"steps with a hook registered again: {step_list(list(found.steps))}",
            f"the most live hooks of `{found.hook}` on one tensor: {found.most}",
        ),
    )
    return [about(finding, found.steps)]
