"""GS479: a loss term divided by an attached magnitude of itself (TD3+BC's Q term over
`Q.abs().mean()` without its detach): the ratio does not change with the term's scale, so
its gradient vanishes (watcher/self_scaled.py). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_common import about, by_optimizer
from gradscope.steps.records import WatchRun


@rule(
    "GS479",
    "self-normalised-term",
    Severity.WARNING,
    "self-normalised-term",
    Stage.WATCH,
    "watch: a loss term is a tensor's mean divided by a magnitude of the same tensor that is "
    "not detached: the ratio does not change with the tensor's scale, and its gradient is 0 "
    "wherever the tensor's values share a sign",
    example="TD3+BC's actor loss -alpha / Q.abs().mean() * Q.mean() + mse(pi, a): without "
    ".detach() on the normaliser the policy learns the behaviour-cloning term only",
    fix="detach the normaliser: lmbda = alpha / Q.abs().mean().detach()",
    objectives=(
        "any loss: a product or quotient of a tensor's mean (or sum) and the reciprocal of "
        "its mean or sum of abs, or its norm, both traced; a normaliser detached, or a tensor "
        "centred before it is divided by its spread, is not judged"
    ),
)
def self_normalised(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The loss's autograd graph, read at the steps watch samples, holds a product (or
    quotient) of MeanBackward0 (or SumBackward0) over a node X and ReciprocalBackward0 of
    MeanBackward0(AbsBackward0(X)) or of a norm of X, through signs, views and constant
    factors: TD3+BC's lambda = alpha / Q.abs().mean() with the detach forgotten. The term is
    alpha * mean(Q) / mean(|Q|), which no scaling of Q changes: d/dQ_i is
    (sum|Q| - sign(Q_i) sum Q) / (sum|Q|)^2, exactly 0 when the batch's Q values share a
    sign (returns all positive, or all negative). The policy then follows the
    behaviour-cloning term only: no error shows, the agent never improves on the data.
    The normaliser detached is a number, and the term keeps Q's gradient."""
    out: list[Finding] = []
    for s in by_optimizer(run):
        kind = run.loss_kind(s.index)
        if kind is None or kind.self_scaled is None or not s.steps:
            continue
        message = s.say(
            f"its loss holds a term that is the {kind.self_scaled}: the ratio does not "
            "change with the tensor's scale, so its gradient is 0 wherever the tensor's "
            "values share a sign (the normaliser of TD3+BC's Q term, alpha / "
            "Q.abs().mean(), left attached): the term trains nothing"
        )
        advice = "detach the normaliser, so it is a number: lmbda = alpha / Q.abs().mean().detach()"
        evidence = (f"loss graph: {kind.describe()}",)
        finding = this.finding(s.subject("loss"), message, advice, evidence=evidence)
        out.append(about(finding, [s.steps[0].step]))
    return out
