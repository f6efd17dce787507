"""GS447: a reference model trained against its own copy: DPO, IPO or KTO's reference (or a
PPO/GRPO KL penalty's reference policy) deep-copied from the policy, left in the optimizer
with its forward attached; and a target network synced from the model by hand (DQN's)
left there the same way. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.steps.records import WatchRun, modules_named

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
    "the model and its copy (a log-ratio to a reference), and both sides are trained; or a "
    "copy the script overwrites from the model every N steps (a target network) also gets "
    "gradients there",
    example="DPO with ref_model = copy.deepcopy(policy) whose log-probs are computed without "
    "torch.no_grad() and whose parameters are passed to the optimizer with the policy's",
    fix="compute the reference's forward under torch.no_grad(), call "
    "ref.requires_grad_(False) and leave it out of the optimizer",
    objectives=(
        "any with a reference or target copy: the tensors one optimizer holds that are equal "
        "at its first step, and whether their gradients are one another's negation, or "
        "whether the script later overwrites one of them (and never the other) between "
        "steps while it holds a gradient: a target network synced by hand (DQN's) that the "
        "optimizer also trains. Copies trained on the same loss side by side (twin critics "
        "deep-copied, two towers loaded from one checkpoint) get alike or unrelated "
        "gradients, are never overwritten and are not judged; a copy written at every "
        "interval (an EMA teacher) is GS446's"
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
    towers loaded from one checkpoint get unrelated ones: both are left alone. Without
    opposite gradients, a copy the script overwrites from the model between steps while
    gradients reach it is a target network trained by the optimizer between its syncs,
    whatever its gradients' cosine: a bootstrapped target (TD3's critics, Polyak-averaged
    every other step) gets nearly the negated gradient too, and a reference is never
    written."""
    facts = run.state_facts
    written = {*facts.hand_written, *facts.hand_moved}
    pairs = [
        m
        for m in facts.mirrored
        if m.cosine <= OPPOSITE
        and max(m.first, m.second) < len(run.params)
        and not {m.first, m.second} & written
    ]
    if not pairs:
        return _synced(run, this)
    model = modules_named([run.params[m.first].name for m in pairs]) or "model"
    copy = modules_named([run.params[m.second].name for m in pairs]) or "its copy"
    worst = max(m.cosine for m in pairs)
    message = (
        f"{copy} is a copy of {model} ({len(pairs)} tensors equal at the first step), in the "
        f"same optimizer, and its gradients are the negation of {model}'s (every pair's "
        f"gradient cosine {worst:.3f} or lower): the loss reads their difference (a "
        "log-ratio to a reference model, a KL penalty to it) and trains both sides, so the "
        "reference drifts away as fast as the model moves and anchors nothing"
    )
    advice = (
        f"compute the forward of {copy} under torch.no_grad(), call requires_grad_(False) on "
        f"{copy} and leave its parameters out of the optimizer"
    )
    evidence = tuple(
        f"{run.params[m.first].name} = {run.params[m.second].name}: gradient cosine {m.cosine:.4f}"
        for m in pairs[:3]
    )
    return [this.finding(copy, message, advice, value=worst, threshold=OPPOSITE, evidence=evidence)]


def _synced(run: WatchRun, this: Rule) -> list[Finding]:
    """A target network copied from the model in the same optimizer: of two tensors equal at
    its first step, the script later writes one in place between steps while it holds a
    gradient (`target.load_state_dict(model.state_dict())` every N steps) and never the
    other. Gradients reach the target and the optimizer applies them, so between syncs the
    target is trained toward the prediction it should anchor (DQN's bootstrapped target
    without its stop-gradient). A copy written at every interval is an EMA teacher
    (GS446's); two towers from one checkpoint are never written; a constraint written on
    both copies (a renorm) writes both."""
    facts = run.state_facts
    written, every = set(facts.hand_written), set(facts.hand_moved)
    pairs = []
    for m in facts.mirrored:
        if max(m.first, m.second) >= len(run.params):
            continue
        first, second = m.first in written, m.second in written
        if first != second and not {m.first, m.second} & every:
            pairs.append((m.second, m.first) if first else (m.first, m.second))
    if not pairs:
        return []
    model = modules_named([run.params[s].name for s, _ in pairs]) or "model"
    copy = modules_named([run.params[t].name for _, t in pairs]) or "its copy"
    message = (
        f"{copy} is a copy of {model} ({len(pairs)} tensors equal at the first step) that the "
        f"script overwrites from it between steps (a target network synced by hand), and it "
        f"sits in the same optimizer with gradients: between syncs the optimizer trains "
        f"{copy} on the loss, so the target moves toward the prediction it should hold still"
    )
    advice = (
        f"compute the forward of {copy} under torch.no_grad() (or .detach() its output), call "
        f"requires_grad_(False) on {copy} and leave its parameters out of the optimizer: only "
        "the sync should move it"
    )
    evidence = tuple(
        f"{run.params[t].name} written in place between steps while holding a gradient; "
        f"{run.params[s].name} not"
        for s, t in pairs[:3]
    )
    return [this.finding(copy, message, advice, value=float(len(pairs)), evidence=evidence)]
