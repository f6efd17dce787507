"""Each step's gradient written with the values of the step before (GS473): a backward ran
between two of an optimizer's steps and every `.grad` was written, yet each held the values
the previous step applied. The gradients copied back from a flat buffer made once (a stale
all-reduce or bucket buffer), or a saved gradient written over the fresh one: each step walks
the first direction again while the batches change, so the loss rises and the learning rate
looks too high. Told by the gradients' fingerprints and identities (watcher/same_grads.py):
no threshold decides it. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import by_optimizer
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import WatchRun

MIN_COMPARED = 3
"""Intervals compared before it is judged: steps 1-2 and 2-3 of a run, and one pair more."""


@rule(
    "GS473",
    "grads-same-values",
    Severity.ERROR,
    "not-reset",
    Stage.WATCH,
    "watch: a backward ran before each step and its gradients were written over with the "
    "values the previous step applied, so every step applied the same gradient",
    example="gradients flattened into a buffer made once (`if buf is None: buf = "
    "_flatten_dense_tensors(grads)`), all-reduced and copied back into .grad each step",
    fix="flatten (or copy into the buffer) the current step's gradients before the all-reduce, "
    "every step, and copy back from that buffer",
    objectives=(
        "any: whether the values in .grad changed across a backward, a mechanism independent "
        "of what the loss means"
    ),
    explains=DIVERGENCE,
)
def grads_same_values(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At more than half the sampled intervals between an optimizer's steps (3 at least), a
    backward ran, every gradient it steps was written (a new tensor, or its version moved),
    and each held the same values as at the step before (fingerprints of their bit patterns,
    every tensor alike): the gradient the backward computed was replaced by the previous
    one. A gradient no one wrote across a step (GS472's) is not counted."""
    series = {s.index: s for s in by_optimizer(run)}
    out = []
    for k, same, compared in run.state_facts.same_grads:
        s = series.get(k)
        if s is None or compared < MIN_COMPARED or same * 2 <= compared:
            continue
        out.append(
            this.finding(
                s.subject("gradients"),
                s.say(
                    f"at {same} of {compared} sampled intervals between steps a backward ran "
                    "and every gradient was written, yet held the very values the previous "
                    "step applied: each step applied the same gradient, not the new batch's"
                ),
                "write the current backward's gradients into .grad each step: flatten them "
                "into the buffer (or copy them into it) after each backward, before the "
                "all-reduce, and copy back from that buffer; do not keep a buffer or a saved "
                "gradient from an earlier step",
                value=same / compared,
                threshold=0.5,
                evidence=(
                    f"gradients rewritten with unchanged values at {same} of {compared} "
                    "intervals compared (steps 1-3, then pairs every 25 up to step 101, every "
                    "500 after it)",
                ),
            )
        )
    return out
