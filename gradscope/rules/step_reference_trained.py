"""GS447: a reference model trained against its own copy: DPO, IPO or KTO's reference (or a
PPO/GRPO KL penalty's reference policy) deep-copied from the policy, left in the optimizer
with its forward attached. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.steps.records import WatchRun, common_module

OPPOSITE = -0.99
"""Cosine at or below which two equal tensors' gradients are one gradient and its negation:
the loss reads their difference (exactly -1 up to rounding)."""


@rule(
    "GS447",
    "reference-trained",
    Severity.WARNING,
    "reference-trained",
    Stage.WATCH,
    "watch: a copy of the trained model (a reference) sits in the same optimizer and gets, at "
    "the first step, exactly the opposite gradient: the loss reads the difference between "
    "the model and its copy (a log-ratio to a reference), and both sides are trained",
    example="DPO with ref_model = copy.deepcopy(policy) whose log-probs are computed without "
    "torch.no_grad() and whose parameters are passed to the optimizer with the policy's",
    fix="compute the reference's forward under torch.no_grad(), call "
    "ref.requires_grad_(False) and leave it out of the optimizer",
    objectives=(
        "any with a reference or target copy: the tensors one optimizer holds that are equal "
        "at its first step, and whether their gradients are one another's negation. Copies "
        "trained on the same loss side by side (twin critics deep-copied, two towers loaded "
        "from one checkpoint) get alike or unrelated gradients and are not judged; a "
        "reference updated only by hand (an EMA teacher) is GS446's"
    ),
)
def reference_trained(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At each optimizer's first step (its gradients in place), the tensors it holds that are
    exact copies of one another (same shape and values, not constant) are paired, and the
    cosine between their gradients read. While the weights are equal, a loss on their
    difference (DPO's (log π - log π_ref) for chosen minus rejected, a KL penalty to a
    reference policy) gives the copy exactly the negated gradient, cosine -1; the optimizer
    then moves the reference away from the policy as fast as the policy moves, so the
    log-ratio grows from both sides and the reference no longer anchors anything. Healthy
    code has no such pair: its reference runs under no_grad, outside the optimizer. Twin
    critics deep-copied and trained on one target get the same gradient (cosine +1), two
    towers loaded from one checkpoint get unrelated ones: both are left alone."""
    pairs = [
        m
        for m in run.state_facts.mirrored
        if m.cosine <= OPPOSITE and max(m.first, m.second) < len(run.params)
    ]
    if not pairs:
        return []
    model = common_module([run.params[m.first].name for m in pairs]) or "model"
    copy = common_module([run.params[m.second].name for m in pairs]) or "its copy"
    worst = max(m.cosine for m in pairs)
    message = (
        f"{copy} is a copy of {model} ({len(pairs)} tensors equal at the first step), in the "
        f"same optimizer, and its gradients are the negation of {model}'s (every pair's "
        f"gradient cosine {worst:.3f} or lower): the loss reads their difference (a "
        "log-ratio to a reference model, a KL penalty to it) and trains both sides, so the "
        "reference drifts away as fast as the model moves and anchors nothing"
    )
    advice = (
        f"compute {copy}'s forward under torch.no_grad(), call {copy}.requires_grad_(False) "
        "and leave its parameters out of the optimizer"
    )
    evidence = tuple(
        f"{run.params[m.first].name} = {run.params[m.second].name}: gradient cosine {m.cosine:.4f}"
        for m in pairs[:3]
    )
    return [this.finding(copy, message, advice, value=worst, threshold=OPPOSITE, evidence=evidence)]
