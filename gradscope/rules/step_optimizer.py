"""Verdicts from what the optimizer's settings and calls mean (GS420-GS422): a weight decay
that erases the weights, parameters frozen inside an optimizer, zero_grad() between
backward() and step(). No torch.

A decay that erases the weights looks like vanishing gradients, and a step that applies no
gradient like a parameter that never learns; the optimizer's param groups
(`run.settings`) and the order of the script's calls tell them apart.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import listed, num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import (
    Series,
    about,
    at_chance,
    by_optimizer,
    finite,
    loss_steps,
    stalled,
    step_list,
    trained_matrices,
    values_changed,
    window,
)
from gradscope.steps.meaning import GroupSettings
from gradscope.steps.records import WatchRun, common_module


# -- GS420 ------------------------------------------------------------------------------
def _equilibrium(g: GroupSettings, adaptive: bool, grad_rms: float | None) -> float | None:
    """The weight magnitude at which the optimizer's steps balance the decay: AdamW's
    per-element step (≈ lr) against lr × wd × |w| gives 1/wd; an L2 decay added to the
    gradient balances it at |g| / wd. None where there is no decay, or where its kind is
    unknown (a third-party class: Prodigy scales its decoupled decay by its adapted d)."""
    if g.weight_decay <= 0 or not math.isfinite(g.weight_decay) or g.decoupled is None:
        return None
    if g.decoupled:
        return 1.0 / g.weight_decay if adaptive else None
    return None if grad_rms is None else grad_rms / g.weight_decay


def _grad_rms(run: WatchRun, s: Series, i: int) -> float | None:
    values = [
        r.param_norms[i]
        for r in s.live()
        if i < len(r.param_norms) and finite(r.param_norms[i]) and (r.param_norms[i] or 0) > 0
    ]
    if not values:
        return None
    size = math.prod(run.params[i].shape) or 1
    return statistics.median(v for v in values if v is not None) / math.sqrt(size)


@rule(
    "GS420",
    "decay-too-strong",
    Severity.ERROR,
    "decay",
    Stage.WATCH,
    "watch: weight decay pulls the weights far below where they started, faster than the "
    "optimizer's steps hold them up, and the loss stalls",
    example="AdamW(weight_decay=100) at lr 5e-4 on a character-level model: 5% of every weight "
    "gone per step, the loss at ln 27 = 3.30",
    fix="a weight_decay in AdamW's usual 0.01-0.1; no decay on biases and norm scales",
    thresholds=("progress-min-fall",),
    supersedes=("GS419",),  # the decay's own step is the large update, not the lr
    objectives=(
        "any whose loss should fall: a decay equilibrium below the weights' scale, with "
        "the loss stalled; the loss's kind is not asked, so a flat custom objective "
        "counts as stalled, and the equilibrium against the weights decides"
    ),
    explains=("GS405", "GS409", "GS410", "GS413", "GS415", "GS417", "GS419"),
)
def decay_too_strong(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A param group's weight decay has an equilibrium below the initial rms of most of its
    weight matrices, and the loss stalls (no progress-min-fall, or none over the second half).
    Decoupled decay (AdamW) removes lr × wd of every weight per step while Adam's step moves
    each element by about lr, so the two balance at |w| ≈ 1/wd; an L2 decay (added to the
    gradient) balances the gradient at |w| ≈ |grad|/wd. Below the weights' own scale the decay
    erases them: the gradients shrink with them (a vanishing symptom) and the loss sits near the
    uniform guess. Only where the decay alone could halve the weights within the optimizer's own
    steps: a loss fitted to ~0 has tiny gradients too, which put |grad|/wd low whatever the
    decay (SGD's stock 5e-4 at lr 0.05 needs ~2800 steps)."""
    # Weight decay that pulls the weight matrices far below where they started, faster than the
    # optimizer's steps can hold them up, while the loss stalls.
    out = []
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        steps, losses = loss_steps(s)
        if settings is None or not stalled(losses, t):
            continue
        for k, g in enumerate(settings.groups):
            found = _erased(run, s, k, g, settings.adaptive)
            if found is None:
                continue
            eq, init, names = found
            if not _decay_had_time(s, k, g, settings.adaptive, init):
                continue  # a fitted loss's tiny gradients, not a decay that could erase
            w = window(len(losses))
            last = statistics.median(losses[-w:])
            lrs = s.steps[-1].lrs
            lr = lrs[k] if k < len(lrs) else g.lr  # the schedule's, at the last step
            shrink = lr * g.weight_decay if g.decoupled else 0.0
            how = _decay_said(settings.kind, g, lr, shrink, eq)
            finding = this.finding(
                s.subject(f"param group {k}"),
                s.say(
                    f"weight decay erases the weights: {how}, below these tensors' initial "
                    f"rms {num(init)}; the loss stalled at {num(last)}" + at_chance(run, s, last)
                ),
                f"lower weight_decay (AdamW's usual values are 0.01-0.1; here at most about "
                f"{num(1 / init / 10 if g.decoupled else g.weight_decay * eq / init / 10)}), "
                "and keep biases and norm scales out of the decayed group",
                value=g.weight_decay,
                threshold=(1 / init) if g.decoupled else None,
                evidence=(
                    f"decayed tensors: {listed(names)}",
                    f"median loss {num(last)} over the last {w} steps",
                ),
            )
            out.append(about(finding, [steps[0].step] if steps else []))
    return out


def _decay_said(kind: str, g: GroupSettings, lr: float, shrink: float, eq: float) -> str:
    """How the group's decay erases its weights: per step (decoupled) or against the gradient."""
    if g.decoupled and shrink > 0:
        return (
            f"{kind}'s decoupled weight_decay {num(g.weight_decay)} at lr "
            f"{num(lr)} removes {shrink:.3g} of every weight per step (half-life "
            f"{math.log(2) / shrink:.0f} steps); its steps (≈ lr per element) hold a weight "
            f"up only to |w| ≈ 1/wd = {num(eq)}"
        )
    return (
        f"{kind}'s weight_decay {num(g.weight_decay)} (L2, added to the "
        f"gradient) outweighs the gradients until |w| ≈ |grad| / wd = {num(eq)}"
    )


def _decay_had_time(s: Series, k: int, g: GroupSettings, adaptive: bool, init: float) -> bool:
    """The decay alone, unopposed by any gradient, could remove half the weights' initial
    size over the optimizer's own steps: a decoupled or SGD decay shrinks them by lr × wd
    (÷ 1 - momentum) per step, Adam's L2 step moves each element by at most about lr. A
    loss fitted to ~0 leaves tiny gradients, so |grad| / wd reads small whatever the decay;
    if the decay had no time to act, it erased nothing (SGD's 5e-4 at lr 0.05 halves the
    weights in ~2800 steps)."""
    lrs = [r.lrs[k] if k < len(r.lrs) else g.lr for r in s.live()]
    if adaptive and not g.decoupled:
        return sum(lrs) >= init / 2
    momentum = min(g.momentum or 0.0, 0.99) if not g.decoupled else 0.0
    return sum(lrs) * g.weight_decay / (1 - momentum) >= math.log(2)


def _erased(
    run: WatchRun, s: Series, group: int, g: GroupSettings, adaptive: bool
) -> tuple[float, float, list[str]] | None:
    """(equilibrium, median initial rms, names) when the decay's equilibrium lies below
    the initial rms of most of the group's matrices: even steps all in one direction
    cannot hold them at the size they started at. A group without matrices (a quantiser's
    step sizes, gains given a group of their own) is judged on its own tensors: a scale
    decayed to 0 saturates what it scales, and every gradient through it is 0."""
    members = [i for i in trained_matrices(run, s) if run.params[i].group == group]
    if not members:
        members = [i for i in _trained(run, s) if run.params[i].group == group]
    rows = []
    for i in members:
        p = run.params[i]
        if p.weight_norm is None or p.weight_norm <= 0:
            continue
        eq = _equilibrium(g, adaptive, None if g.decoupled else _grad_rms(run, s, i))
        if eq is not None:
            rows.append((eq, p.weight_norm / math.sqrt(math.prod(p.shape) or 1), p.name))
    below = [r for r in rows if r[0] < r[1]]
    if not rows or len(below) * 2 <= len(rows):
        return None
    return (
        statistics.median(r[0] for r in below),
        statistics.median(r[1] for r in below),
        [r[2] for r in below],
    )


def _trained(run: WatchRun, s: Series) -> list[int]:
    """Every tensor the optimizer trains, whatever its shape."""
    params = run.params
    return [
        i
        for i in s.members
        if i < len(params) and params[i].requires_grad and params[i].in_optimizer
    ]


# -- GS421 ------------------------------------------------------------------------------
@rule(
    "GS421",
    "frozen-in-optimizer",
    Severity.INFO,
    "update-ratio",
    Stage.WATCH,
    "watch: parameters with requires_grad=False sit in an optimizer's param groups and never "
    "move; an error when they are all it holds, so its steps move nothing",
    example="`model.encoder.requires_grad_(False)` after `Adam(model.parameters())`",
    fix="nothing if meant; else requires_grad_(True). Passing only the trainable parameters makes "
    "the intent plain and saves the optimizer's state",
    objectives=(
        "any: frozen parameters kept in an optimizer, a mechanism independent of what the "
        "loss means"
    ),
)
def frozen_in_optimizer(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Parameters with requires_grad=False sit in an optimizer's param groups and got no
    gradient in any step: the optimizer keeps them and never moves them. Often meant (a frozen
    backbone passed as model.parameters()), so information. When they are every tensor the
    optimizer holds and nothing wrote them either, its steps move nothing at all: the tensor
    meant to learn was never made to require grad (a style-transfer image cloned from the
    content, a soft prompt built without requires_grad), an error."""
    out = []
    for s in by_optimizer(run):
        if s.manual(run):
            continue
        held = [
            i
            for i in s.members
            if i < len(run.params)
            and not run.params[i].requires_grad
            and run.params[i].in_optimizer
            and not run.tensors.ever_had_grad(i)
        ]
        if not held:
            continue
        frozen = [run.params[i].name for i in held]
        modules = sorted({n.rpartition(".")[0] or n for n in frozen})
        copied = [i for i in held if values_changed(run.params[i])]
        finding = this.finding(
            s.subject(common_module(frozen) or "parameters"),
            s.say(
                f"{len(frozen)} parameter(s) in {run.optimizer_label(s.index)}'s param groups "
                f"are frozen (requires_grad=False), get no gradient and the optimizer never "
                "moves them: "
                + ", ".join(modules[:4])
                + (f" (+{len(modules) - 4} more modules)" if len(modules) > 4 else "")
                + (
                    f"; {len(copied)} of them changed values all the same (norm at the first "
                    "step and at the end): updated by copy (an EMA, target or teacher network)"
                    if copied
                    else ""
                )
            ),
            "fine if meant (a frozen backbone); else call requires_grad_(True) on them. To make "
            "the intent plain and save the optimizer's state, give the optimizer only "
            "[p for p in model.parameters() if p.requires_grad]",
            value=float(len(frozen)),
            evidence=(f"frozen parameters: {', '.join(frozen[:6])}",),
        )
        if len(held) == len([i for i in s.members if i < len(run.params)]) and not copied:
            finding = _moves_nothing(finding)
        out.append(finding)
    return out


def _moves_nothing(finding: Finding) -> Finding:
    """Every tensor the optimizer holds is frozen and unwritten: no step of it moves
    anything, whatever the loss asks."""
    return replace(
        finding,
        severity=Severity.ERROR,
        message=finding.message + "; they are all the optimizer holds: none of its steps moved "
        "anything",
        advice="give this optimizer the tensor it is meant to train, requiring grad: call "
        "requires_grad_(True) on it before the forward that uses it (an image or a prompt "
        "cloned from data does not require grad), or pass it to the optimizer if it sits in "
        "none (GS411 names those); if the optimizer is meant to stay idle, do not step it",
    )


# -- GS422 ------------------------------------------------------------------------------
@rule(
    "GS422",
    "zero-grad-before-step",
    Severity.ERROR,
    "reset-order",
    Stage.WATCH,
    "watch: zero_grad() ran between backward() and step(), so the steps apply no gradient",
    example="`loss.backward(); optimizer.zero_grad(); optimizer.step()`",
    fix="call zero_grad() before loss.backward() or right after optimizer.step()",
    objectives=(
        "any: a zero_grad() between backward and step(), a mechanism independent of what "
        "the loss means"
    ),
    explains=("GS405", "GS410", "GS413", "GS415", "GS417"),
)
def zeroed_before_step(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At more than half the steps zero_grad() ran after the step's backward calls and before
    step(), with gradients there to clear: the step applied none of them (momentum, Adam's
    moments or decay may still move the weights a little, so the run looks alive). The step's
    loss is still recorded: the backward calls before the zero_grad belong to it."""
    # zero_grad ran after the step's backward calls and before step(), at most steps: every
    # update applies no gradient (Adam's moments, decay and momentum still move the weights a
    # little, so the run looks alive).
    out = []
    for s in by_optimizer(run):
        steps = s.live()
        zeroed = [r for r in steps if r.zeroed]
        if not steps or len(zeroed) * 2 <= len(steps):
            continue
        calls = statistics.median(r.backward_calls or 1 for r in zeroed)
        finding = this.finding(
            s.subject("optimizer.zero_grad"),
            s.say(
                f"zero_grad() ran between backward() and step() at {len(zeroed)} of "
                f"{len(steps)} steps: it cleared the gradients of the step's "
                f"{calls:g} backward call(s), so every update applied no gradient"
            ),
            "call optimizer.zero_grad() before loss.backward() (or right after "
            "optimizer.step()), never between backward() and step()",
            value=len(zeroed) / len(steps),
            threshold=0.5,
            evidence=(
                f"steps whose gradients were cleared before step(): "
                f"{step_list([r.step for r in zeroed])}",
                f"step {zeroed[0].step}: loss {num(zeroed[0].loss)}, gradient norm at the step "
                f"{num(zeroed[0].grad_norm)}",
            ),
        )
        out.append(about(finding, (r.step for r in zeroed)))
    return out
