"""Copies trained as separate models (GS464): several optimizers, each over tensors of its
own, whose steps have the same loss and the same gradient norms, to the last digit, at every
step. Their models started equal and see the same batches, so they stay one model: a deep
ensemble built from deepcopies of one network fed one data order has no spread, and its
uncertainty is zero. Members initialised apart, or shuffled apart, differ from the first
step. No torch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer
from gradscope.steps.records import StepRecord, WatchRun

MIN_STEPS = 10
"""Steps of each compared at least: equal losses at a handful of steps could be a model
whose loss is fixed by its data (an all-zero batch), not one trajectory."""
SAME = 1e-6
"""Relative difference under which two float32 values are the same computation (a GPU's
reductions may round a sum differently in its last digits)."""


@rule(
    "GS464",
    "copies-trained",
    Severity.WARNING,
    "copies",
    Stage.WATCH,
    "watch: several optimizers over tensors of their own take steps with the same loss and "
    "the same gradient norms at every step: their models are copies fed the same batches",
    example="a deep ensemble of `copy.deepcopy(net)` members, each with its own Adam, all "
    "fed one shuffled order: four optimizers, one trajectory",
    fix="build each member anew (its own random initialisation) and give each its own data "
    "order (its own `randperm` or DataLoader), so the members differ",
    objectives=(
        "any with several optimizers over disjoint tensors of the same shapes: the "
        "mechanism (equal starts, equal batches) does not depend on what the loss means"
    ),
)
def copies_trained(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Optimizers whose tensors are disjoint and shaped alike, whose k-th steps have the same
    finite loss and the same nonzero gradient norm (total and per tensor, where recorded)
    at each of MIN_STEPS or more steps: one finding per group of copies. Two optimizers
    over the same tensors are GS456's; members that started apart or see their own batches
    differ at the first step and stay silent."""
    series = [s for s in by_optimizer(run) if len(s.steps) >= MIN_STEPS and s.members]
    out: list[Finding] = []
    taken: set[int] = set()
    for k, a in enumerate(series):
        if a.index in taken:
            continue
        twins = [b for b in series[k + 1 :] if b.index not in taken and _copies(run, a, b)]
        if twins:
            taken.update(b.index for b in twins)
            out.append(_finding(a, twins))
    return out


def _copies(run: WatchRun, a: Series, b: Series) -> bool:
    if set(a.members) & set(b.members) or not run.members_of(a.index):
        return False
    if [run.params[i].shape for i in a.members] != [run.params[i].shape for i in b.members]:
        return False
    n = min(len(a.steps), len(b.steps))
    return all(_same_step(a, b, ra, rb) for ra, rb in zip(a.steps[:n], b.steps[:n], strict=True))


def _same_step(a: Series, b: Series, ra: StepRecord, rb: StepRecord) -> bool:
    if ra.loss is None or rb.loss is None or not ra.grad_norm:
        return False
    if not (_same(ra.loss, rb.loss) and _same(ra.grad_norm, rb.grad_norm or 0.0)):
        return False
    if not (ra.detail and rb.detail):
        return True
    na, nb = _norms(ra, a.members), _norms(rb, b.members)
    return len(na) == len(nb) and all(_same(x, y) for x, y in zip(na, nb, strict=True))


def _norms(r: StepRecord, members: Sequence[int]) -> list[float]:
    return [r.param_norms[i] or 0.0 for i in members if i < len(r.param_norms)]


def _same(x: float, y: float) -> bool:
    return math.isfinite(x) and math.isfinite(y) and math.isclose(x, y, rel_tol=SAME)


def _finding(a: Series, twins: Sequence[Series]) -> Finding:
    names = ", ".join(s.name or f"optimizer {s.index}" for s in (a, *twins))
    first, last = a.steps[0], a.steps[-1]
    return about(
        RULES["GS464"].finding(
            names,
            f"{names} train copies of one model: at each of their {len(a.steps)} steps "
            f"they had the same loss ({num(first.loss or 0.0)} at the first, "
            f"{num(last.loss or 0.0)} at the last) and the same gradient norms; their "
            "models started equal and see the same batches, so they stay one model (an "
            "ensemble of them has no spread)",
            "build each member anew, with its own random initialisation (not a deepcopy "
            "of one network), and give each its own data order; if a single model is "
            "meant, train it once: the copies add cost and no spread",
            value=float(len(twins) + 1),
            threshold=float(MIN_STEPS),
            evidence=(
                f"step 1 of each: loss {num(first.loss or 0.0)}, gradient norm "
                f"{num(first.grad_norm or 0.0)}",
            ),
        ),
        [first.step],
    )
