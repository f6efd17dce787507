"""GS448: a network frozen with requires_grad_(False) (a perceptual loss's features, a
distillation teacher, a frozen backbone) left in train mode, so its BatchNorms refold every
batch into their running statistics and the fixed network drifts (watcher/frozen_norms.py).
No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import DriftedNorms

SHOWN = 4


@rule(
    "GS448",
    "frozen-stats-drift",
    Severity.WARNING,
    "frozen-stats",
    Stage.WATCH,
    "watch: a network frozen with requires_grad_(False) and in no optimizer ran its "
    "BatchNorms in train mode: their running statistics followed the batches, so the "
    "fixed network drifted",
    example="vgg = vgg19(weights=...).features; vgg.requires_grad_(False) for a perceptual "
    "loss, without vgg.eval()",
    fix="call .eval() on the frozen network (again after every model.train() when it is a "
    "submodule of the trained model, or override train() to keep it in eval)",
    objectives=(
        "any with a frozen network: its parameters' flags, the optimizers' param groups and "
        "version counters (of the weights and of the BatchNorms' batch counter), whatever "
        "the loss means"
    ),
)
def frozen_stats_drift(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A network whose every parameter has requires_grad False, none in an optimizer, and
    none written in place during the run (an EMA teacher or a synced target network is
    written every step or sync: silent), with weights besides its norms', whose BatchNorms
    ran forwards in train mode after the first optimizer step: requires_grad_(False)
    freezes the weights, not the statistics, and each such forward refolds the batch into
    the running mean and variance (with the training images, and with the generated ones a
    perceptual loss compares). The features a loss compares or a head reads shift under
    the trained model, and eval mode later normalises with statistics the training never
    used. A BatchNorm frozen alone inside a trained block (its statistics meant to follow
    the trained convolutions) and a frozen network in eval mode stay silent."""
    return [_finding(this, d) for d in run.state_facts.drifted_norms]


def _finding(this: Rule, d: DriftedNorms) -> Finding:
    shown = ", ".join(d.norms[:SHOWN]) + (" …" if len(d.norms) > SHOWN else "")
    named = d.network if d.network == d.kind else f"{d.network} ({d.kind})"
    message = (
        f"{named} is frozen (requires_grad False, in no optimizer) but its "
        f"{len(d.norms)} BatchNorm module{'s' if len(d.norms) > 1 else ''} ran "
        f"{d.forwards} forwards in train mode from optimizer step {d.since} to the run's "
        f"end (step {d.steps}): their running "
        "statistics followed the batches, so the fixed network drifted"
    )
    advice = (
        f"call .eval() on {d.network} once it is built, and again after every model.train() "
        "if it sits inside the trained model"
    )
    return this.finding(
        d.network, message, advice, value=float(d.forwards), evidence=(f"BatchNorms: {shown}",)
    )
