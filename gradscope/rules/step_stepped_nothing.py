"""An optimizer that steps nothing (GS466): at every one of its steps a backward ran, and
none of its tensors had a gradient. Its tensors learned at some other step of the run, so
they are not cut from the graph for good (GS413): the loss is computed through other
tensors that this optimizer does not hold. A trial loop that rebuilds the model and builds
its optimizer from a parameter list kept from the first trial, or an optimizer built once
before a loop that rebuilds the model, does this: every later trial trains nothing, and
its loss stays where the new model's initialisation put it. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer
from gradscope.steps.records import WatchRun

MIN_STEPS = 5
"""Steps without a gradient, each after a backward: fewer are a warm-up or a last step."""


@rule(
    "GS466",
    "stepped-nothing",
    Severity.ERROR,
    "none-grad",
    Stage.WATCH,
    "watch: an optimizer none of whose tensors had a gradient at any of its steps, while a "
    "backward ran before each and those tensors learned at other steps",
    example="`params = list(model.parameters())` kept from the first trial of a search and "
    "`Adam(params)` built in each later trial, whose loss goes through a new model",
    fix="build each optimizer from the parameters of the model the loss is computed with, "
    "after that model is built (`opt = Adam(model.parameters())` inside the trial loop)",
    objectives="any: which tensors the optimizer holds and which get gradients",
    explains=("GS404", "GS405", "GS410", "GS413", "GS415", "GS417"),
)
def optimizer_stepped_nothing(
    run: WatchRun, t: Thresholds, *, this: Rule = DECLARED
) -> list[Finding]:
    """Each optimizer whose every step (MIN_STEPS at least) came after a backward and found
    its tensors, which all require grad and some of which had a gradient at another step,
    without a gradient (None: gradients of exactly 0 say the loss reaches them)."""
    out = []
    for s in by_optimizer(run):
        if _stepped_nothing(run, s):
            steps = s.live()
            finding = this.finding(
                s.subject("optimizer.step"),
                s.say(
                    f"none of its {len(s.members)} tensor(s) had a gradient at any of its "
                    f"{len(steps)} steps, though a backward ran before each and they learned "
                    "at other steps of the run: the loss was computed through tensors this "
                    "optimizer does not hold"
                ),
                "build the optimizer from the parameters of the model the loss is computed "
                "with, after that model is built (inside a trial loop: `opt = "
                "Adam(model.parameters())` after `model = ...`, never from a list kept from "
                "an earlier trial)",
                value=0.0,
                threshold=float(MIN_STEPS),
                evidence=(f"steps {steps[0].step}-{steps[-1].step}, every gradient norm 0",),
            )
            out.append(about(finding, [steps[0].step]))
    return out


def _stepped_nothing(run: WatchRun, s: Series) -> bool:
    steps = s.live()
    members = [i for i in s.members if i < len(run.params)]
    if len(steps) < MIN_STEPS or not members or s.manual(run):
        return False
    if any(r.grad_norm != 0 or r.backward_calls < 1 for r in steps):
        return False
    if any(i < len(r.param_norms) and r.param_norms[i] is not None for r in steps for i in members):
        return False  # zeros, not None: the loss reaches them (a tensor started at 0: GS413)
    if not all(run.params[i].requires_grad for i in members):
        return False
    return any(run.tensors.ever_had_grad(i) for i in members)
