"""Where a NaN is made in the backward (GS433), and weights gone non-finite under a finite
loss (GS434). No torch.

Both read what the watcher's NaN probe (watcher/nan_probe.py) found after a step GradScaler
skipped, or after the recorder read back the first non-finite gradient of a finite loss:
the backward node that made it
on a later backward whose weights and loss were still finite, or the weights that the
update had already filled with NaN/Inf (then no node can be blamed from that run: the
advice is the `inspect --script --step N` that replays the step).
"""

from __future__ import annotations

import math
import re

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about, inspect_command
from gradscope.spectral_gaps import gap_division
from gradscope.steps.records import WatchRun


def op_of(node: str) -> str:
    """`sqrt (SqrtBackward0)` from the backward node's class name."""
    base = re.sub(r"Backward\d*$", "", node)
    return f"{base.lower()} ({node})" if base and base != node else node


def _names(names: tuple[str, ...], count: int) -> str:
    return ", ".join(names) + (f" (+{count - len(names)} more)" if count > len(names) else "")


@rule(
    "GS433",
    "backward-nan-origin",
    Severity.ERROR,
    "exploding",
    Stage.WATCH,
    "watch: the backward op that made the first non-finite gradient from finite ones while "
    "the loss was finite, told apart from the ops that only passed it on",
    example="`torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))`: a row's distance to itself "
    "is sqrt(0), whose derivative is infinite; `torch.where(mask, torch.log(p), 0)` where p is "
    "0: the dropped log still gets 0 × ∞ = NaN in the backward",
    fix="move the op's input off the point where its derivative is infinite (sqrt(x + eps), "
    "acos(x.clamp(-1 + eps, 1 - eps))), or compute it on a safe value before masking "
    "(torch.log(torch.where(mask, p, 1)))",
    objectives=(
        "any: the first backward node that made a finite gradient non-finite, whatever the loss"
    ),
    explains=("GS401", "GS403", "GS407", "GS408", "GS434"),
)
def backward_nan_origin(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Hooks on one backward after the first non-finite gradient of a finite loss was read
    back, and only where the weights and that backward's loss were finite (a weight already
    NaN would make every node downstream of it look guilty): the first node whose incoming
    gradient was finite and whose outgoing one was not. Its incoming gradient 0 where it made
    NaN means a masked value (0 × an infinite local derivative)."""
    found = run.backward_nan
    if found is None:
        return []
    why = (
        "its incoming gradient was 0 where it made NaN: 0 × an infinite local derivative, a "
        "value the forward masked out (a multiplication by 0 or torch.where) still goes "
        "through the op's backward"
        if found.masked
        else "its local derivative is infinite there (sqrt or pow at 0, acos or asin at ±1, "
        "log at 0)"
    )
    fix = (
        "compute the op on a safe value before the mask (torch.where(mask, x, 1) inside it)"
        if found.masked
        else "clamp the op's input away from that point or add an epsilon"
    )
    why, fix = gap_division(found.op) or (why, fix)
    evidence = [
        f"step {found.seen}: the loss was finite and its gradients were not",
        f"watched at step {found.step}'s backward: the weights and the loss were finite; "
        f"{found.passed} later node(s) only passed it on",
    ]
    if found.params:
        evidence.append(f"its gradient flows to {', '.join(found.params)}")
    finding = RULES["GS433"].finding(
        found.op,
        f"the backward of {op_of(found.op)} made the first non-finite gradient from finite ones "
        f"(first seen at step {found.seen}, the loss finite): {why}",
        f"{fix}; `{inspect_command(run, found.step)}` names its forward line",
        value=float(found.seen),
        evidence=tuple(evidence),
    )
    return [about(finding, [found.seen, found.step])]


@rule(
    "GS434",
    "weights-nan",
    Severity.ERROR,
    "exploding",
    Stage.WATCH,
    "watch: the loss was finite but its gradients were not, and the update wrote NaN/Inf into "
    "the weights: every later step is lost",
    example="a loss with `torch.sqrt(d)` where d is sometimes 0: the loss reads fine, its "
    "gradient is NaN, SGD copies it into every weight it reaches",
    fix="`gradscope inspect --script train.py --step N -- ARGS` replays that step and names "
    "the backward op that made the NaN; until it is fixed, clip with "
    "clip_grad_norm_(..., error_if_nonfinite=True) or skip non-finite steps; under a loss "
    "scale kept by hand, skip each step whose gradients are not all finite",
    objectives="any: the weights' values, whatever the loss",
    explains=("GS401", "GS403", "GS407", "GS408"),  # its update wrote the NaN into the weights
)
def weights_nan_loss_finite(run: WatchRun, t: Thresholds) -> list[Finding]:
    """The weights read back non-finite (after the recorder saw the first non-finite
    gradient of a finite loss, at the next backward or at the end of the watch; that step
    is read back at once, not at the tenth step's read-back, where its gradient norms
    show it without a wait for the device: see watcher/nan_probe.early). The loss
    alone never shows it at that step, and from then on every forward is NaN: the step to
    replay is the one named."""
    found = run.weights_nan
    if found is None:
        return []
    finding = RULES["GS434"].finding(
        found.names[0] if found.names else "weights",
        f"the loss was finite at step {found.seen} but its gradients were not, and the "
        f"update wrote them into the weights: {found.count} tensor(s) held NaN/Inf by step "
        f"{found.checked}",
        f"run `{inspect_command(run, found.seen)}` to name the backward op that made the "
        "NaN/Inf at that step; clip_grad_norm_(..., error_if_nonfinite=True) stops the run "
        "there instead of training on NaN" + _skip_advice(run),
        value=float(found.seen),
        evidence=(
            f"non-finite weights: {_names(found.names, found.count)}",
            f"step {found.seen}: a finite loss, non-finite gradients",
        ),
    )
    return [about(finding, [found.seen])]


def _skip_advice(run: WatchRun) -> str:
    """Where the loss is multiplied by a power of two above 1 outside GradScaler (a loss
    scale kept by hand), gradients that overflow while the loss stays finite are what
    that scale makes now and then: the script's own check let such a step through."""
    factors = [
        t.factor
        for kind in run.loss_kinds
        if kind is not None and not kind.scaled
        for t in kind.terms
        if math.isfinite(t.factor) and t.factor > 1 and math.frexp(t.factor)[0] == 0.5
    ]
    if not factors:
        return ""
    return (
        f"; the loss is multiplied by {factors[0]:g}: if that is a loss scale kept by hand, "
        "a step whose gradients overflow must be skipped: test torch.isfinite on every "
        "gradient before optimizer.step() (not the loss, which stays finite; not isinf "
        "alone, as an unscale or a clip turns inf into NaN), skip the step and halve the "
        "scale"
    )
