"""A loss term weighted 0 at the first steps that a schedule switches on later (certified
training's verified loss mixed in as epsilon ramps up, a consistency loss's warm-up): the
objective itself changes, so its level rising says nothing alone. No torch."""

from __future__ import annotations

from gradscope.rules.opposed import opposed
from gradscope.rules.own_targets import own_predictions
from gradscope.steps.meaning import LossKind
from gradscope.steps.records import StepRecord, WatchRun

READ_AGAIN_AFTER = 100
"""The watcher reads the loss's kind at its first steps and again every this many steps: a
run this long or shorter was read at its first steps only, where a ramp-up is still 0."""


def switched_on(kind: LossKind | None, last_step: int) -> bool:
    """A term weighted 0 at the first steps read that a schedule switches on: a later read
    saw its weight rise (ramped), or the run ended before the kind was read again; so is an
    interval bound's box of radius 0 at the first steps, or one that grew. One still
    0 at a later read is switched off, not scheduled (GS469 tells it)."""
    if kind is None:
        return False
    short = last_step <= READ_AGAIN_AFTER
    return any(t.ramped or (0 in (t.factor, t.radius) and short) for t in kind.terms)


def scheduled_doubt(kind: LossKind | None, last_step: int) -> str | None:
    """Why the loss's level says nothing alone when a term is switched on by a schedule."""
    if not switched_on(kind, last_step):
        return None
    if kind is not None and any(t.radius is not None for t in kind.terms):
        return (
            "the loss is the worst case over an input box (interval bounds carried through "
            "|W|, certified training) whose radius is 0 at the first steps or grows by a "
            "schedule (an epsilon ramp), so the objective itself changes and the loss's "
            "level says nothing alone"
        )
    return (
        "a term of the loss is weighted 0 at the first steps and switched on by a schedule "
        "(a verified or consistency loss mixed in as it ramps up), so the objective itself "
        "changes and the loss's level says nothing alone"
    )


def objective_moves(run: WatchRun, kind: LossKind | None, steps: list[StepRecord]) -> str | None:
    """Why the loss's level says nothing alone though its kind is one objective: a term a
    schedule switches on, a model trained on its own predictions (own_targets.py), or a
    loss another optimizer ascends (opposed.py)."""
    last = steps[-1].step if steps else 0
    index = steps[0].optimizer if steps else -1
    return scheduled_doubt(kind, last) or own_predictions(run) or opposed(run, index, kind)
