"""The loss kinds read at several backward calls of a step (`plus`) and at several steps
(`union`) joined into one: terms summed, a weight that starts at 0 and ramps up, a sign
that the data sets step by step (loss_graph.py reads each)."""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.watcher.loss_graph import MAX_TERMS


def plus(a: LossKind, b: LossKind) -> LossKind:
    """The kind of a step whose loss is a's plus b's (two backward calls on different
    losses): every term of both, so its bound and sign are the sum's."""
    terms = (a.terms + b.terms)[:MAX_TERMS]
    unknown = a.unknown_terms + b.unknown_terms
    derivative = a.derivative or b.derivative
    renormalised = a.renormalised or b.renormalised
    where = a.where or b.where
    kind = LossKind(terms, unknown, a.scaled or b.scaled, where, derivative, renormalised)
    return replace(kind, self_scaled=a.self_scaled or b.self_scaled)


def union(a: LossKind, b: LossKind) -> LossKind:
    """The kind of a run whose steps' losses were a's at some steps and b's at others (a
    detector's box and class terms only on batches that hold an object): every term either
    showed, each kind and sign once, so a term that comes and goes is read as one more term
    of the objective, whose level then varies with the batch. A term weighted 0 in a takes
    its weight from b (_ramped): a factor still 0 is 0 at every step read. An interval
    bound's box that grew in b makes a's term ramped too (_widened)."""
    a = _counted(_widened(_ramped(a, b), b), b)
    if a.renormalised is None and b.renormalised is not None:
        a = replace(a, renormalised=b.renormalised, where=a.where or b.where)
    if a.self_scaled is None and b.self_scaled is not None:
        a = replace(a, self_scaled=b.self_scaled)
    seen = {(t.kind, t.negated) for t in a.terms}
    extra = tuple(t for t in b.terms if (t.kind, t.negated) not in seen)
    if not extra and b.unknown_terms <= a.unknown_terms:
        return a
    terms = _signed_by_data(a.terms + extra, a, b)[:MAX_TERMS]
    return replace(a, terms=terms, unknown_terms=max(a.unknown_terms, b.unknown_terms))


def _ramped(a: LossKind, b: LossKind) -> LossKind:
    """a, each term whose factor was 0 given b's factor for it where that is not 0 (or could
    not be read): a weight ramped up from 0 (a consistency loss's warm-up, an unlabelled
    loss switched on after some steps) is 0 at the first steps only. b's term is the one at
    the same place when both list the same kinds in the same order, else the first of its
    kind with a weight."""
    zeros = [i for i, t in enumerate(a.terms) if t.factor == 0]
    if not zeros:
        return a
    aligned = [t.kind for t in a.terms] == [t.kind for t in b.terms]
    terms = list(a.terms)
    for i in zeros:
        kind = terms[i].kind
        weighted = [t.factor for t in b.terms if t.kind == kind and t.factor != 0]
        later = b.terms[i].factor if aligned else (weighted or [0.0])[0]
        if later != 0:
            terms[i] = replace(terms[i], factor=later, ramped=True)
    return replace(a, terms=tuple(terms))


def _widened(a: LossKind, b: LossKind) -> LossKind:
    """a, each term fed an interval bound (interval_bounds.py) whose box is wider in b's
    term of its kind marked ramped: certified training's epsilon grows by a schedule. A
    wider box by rounding only (the data clamped to its range) is the same box."""
    terms = list(a.terms)
    for i, t in enumerate(terms):
        later = [u.radius for u in b.terms if u.kind == t.kind and u.radius is not None]
        if t.radius is not None and later and later[0] > t.radius * (1 + GREW) + 1e-12:
            terms[i] = replace(t, radius=later[0], ramped=True)
    widened = any(t is not u for t, u in zip(terms, a.terms, strict=True))
    return replace(a, terms=tuple(terms)) if widened else a


GREW = 0.01
"""A box's radius this much wider (relative) is a wider box, not rounding."""


def _signed_by_data(terms: tuple[LossTerm, ...], a: LossKind, b: LossKind) -> tuple[LossTerm, ...]:
    """`terms`, those of a kind whose sign changed from step to step marked `sign_varies`:
    the kind came with one sign at each step, not the same at every step (REINFORCE's
    `R * cross_entropy(logits, a)` with a return R of either sign), so a factor read from
    the data sets the sign, not the objective. One step holding both signs of a kind (a
    loss minimised on one set and ascended on another) is left as it is."""
    both_b = _both_signs(b.terms)
    both_a = _both_signs(a.terms) - {t.kind for t in a.terms if t.sign_varies}
    signs: dict[str, set[bool]] = {}
    for t in terms:
        signs.setdefault(t.kind, set()).add(t.negated)
    varies = {k for k, s in signs.items() if len(s) == 2 and k not in both_b | both_a}
    return tuple(replace(t, sign_varies=True) if t.kind in varies else t for t in terms)


def _both_signs(terms: tuple[LossTerm, ...]) -> set[str]:
    """The kinds that come both negated and not among `terms`."""
    negated = {t.kind for t in terms if t.negated}
    return negated & {t.kind for t in terms if not t.negated}


def _counted(a: LossKind, b: LossKind) -> LossKind:
    """a, its summed terms marked `counted` where b's term of the same kind and sign came
    with another finite factor: the script divides that sum by a count it takes from each
    batch (the positive anchors a detector matched), so it is a mean over those."""
    factors = {(t.kind, t.negated): t.factor for t in b.terms if t.reduction == "sum"}

    def moved(t: LossTerm) -> bool:
        other = factors.get((t.kind, t.negated), math.nan)
        both = math.isfinite(t.factor) and math.isfinite(other) and t.factor != 0
        return both and abs(other / t.factor - 1) > 1e-6

    marked = [replace(t, counted=True) if t.reduction == "sum" and moved(t) else t for t in a.terms]
    if all(m is t for m, t in zip(marked, a.terms, strict=True)):
        return a
    return replace(a, terms=tuple(marked))
