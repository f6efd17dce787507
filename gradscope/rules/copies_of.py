"""Which tensors outside every optimizer are copies of trained ones (a target, an EMA, a
teacher): the same name below another top-level module, the same shape, and the same
values at the start (GS411's copy advice, rules/step_outside.py). Several trained
parameters can share a name and shape (twin critics and their two targets; an actor and a
critic with layers alike): a copy is matched to the one it started equal to."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from gradscope.steps.records import ParamInfo, WatchRun

Trained = dict[tuple[str, tuple[int, ...]], tuple[str, ...]]


@dataclass(frozen=True)
class Originals:
    """The trained parameters by (name below their top-level module, shape), their first
    norms, and which trained top-level module each untrained one mirrors."""

    trained: Trained
    firsts: dict[str, float | None]
    pairs: dict[str, str]


def trained_shapes(run: WatchRun, among: set[int] | None = None) -> Originals:
    """(name below its top-level module, shape) → names of the parameters optimizers train
    there (or of those at the positions `among`), in the run's order; and each other
    top-level module's original (see _pairs)."""
    found: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for i, p in enumerate(run.params):
        if (p.in_optimizer if among is None else i in among) and "." in p.name:
            found.setdefault((p.name.partition(".")[2], p.shape), []).append(p.name)
    trained = {key: tuple(names) for key, names in found.items()}
    firsts = {p.name: p.weight_norm for p in run.params}
    return Originals(trained, firsts, _pairs(run, trained, firsts))


def _pairs(run: WatchRun, trained: Trained, firsts: dict[str, float | None]) -> dict[str, str]:
    """Top-level module → the trained one it mirrors, read where a tensor started equal to
    exactly one trained tensor of its name and shape (most such tensors win): a zero bias
    equals every twin's and says nothing alone."""
    votes: dict[str, Counter[str]] = {}
    for p in run.params:
        same = _same_start(p, trained, firsts)
        if len(same) == 1:
            votes.setdefault(top(p.name), Counter())[top(same[0])] += 1
    return {mod: counts.most_common(1)[0][0] for mod, counts in votes.items()}


def _same_start(p: ParamInfo, trained: Trained, firsts: dict[str, float | None]) -> list[str]:
    """The trained tensors of p's name and shape whose first norm is p's (or unread)."""
    names = trained.get((p.name.partition(".")[2], p.shape), ()) if "." in p.name else ()
    return [n for n in names if n != p.name and not _differ(p.weight_norm, firsts.get(n))]


def started_apart(run: WatchRun, originals: Originals) -> set[tuple[str, str]]:
    """(top-level module, the trained one its names mirror) that started with different
    values: a copy (deep-copied, or loaded with the original's state) starts with the
    original's values, while a network of the same architecture initialised on its own
    (NeRF's fine network beside its coarse one, an ensemble's member) starts elsewhere.
    One pair of tensors whose first norms were both read and are apart is enough (zero
    biases are equal in any two networks)."""
    apart = set()
    for p in run.params:
        original = copy_of(p, originals)
        if original and _differ(p.weight_norm, originals.firsts.get(original)):
            apart.add((top(p.name), top(original)))
    return apart


def top(name: str) -> str:
    """The top-level module a parameter's name starts with."""
    return name.partition(".")[0]


def _differ(a: float | None, b: float | None) -> bool:
    """Two first norms, both read, that no exact copy would give (finite, beyond rounding)."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) > 1e-5 * max(abs(a), abs(b), 1e-12)


def copy_of(p: ParamInfo, originals: Originals) -> str:
    """The trained parameter p mirrors (same name below a different top-level module, same
    shape: q_net_target.0.weight of q_net.0.weight), or "". Among several, the one it
    started equal to, under the trained module its other tensors mirror; else the first."""
    names = originals.trained.get((p.name.partition(".")[2], p.shape), ())
    if "." not in p.name or not names:
        return ""
    same = _same_start(p, originals.trained, originals.firsts) or list(names)
    paired = [n for n in same if top(n) == originals.pairs.get(top(p.name))]
    return (paired or same)[0]
