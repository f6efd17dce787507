"""A tensor two optimizers step (GS456): each applies its own loss's gradients to it, with
its own state, at the steps of both. DARTS's architecture weights handed to the network's
SGD as well as to their own Adam are trained on the training batches too, which the
bilevel search exists to keep them from. No torch."""

from __future__ import annotations

import statistics

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, step_list
from gradscope.rules.trunk_heads import one_backward, trains_own_heads
from gradscope.steps.records import WatchRun


@rule(
    "GS456",
    "stepped-twice",
    Severity.WARNING,
    "shared-params",
    Stage.WATCH,
    "watch: a parameter sits in two optimizers whose steps interleave, each stepping it with "
    "the gradients of its own backward",
    example="DARTS with `SGD(model.parameters())` for the weights beside `Adam([alphas])`: "
    "the architecture weights also follow the training loss",
    fix="give each optimizer its own parameters: filter the shared ones out of one of them "
    "(`[p for n, p in model.named_parameters() if n != 'alphas']`)",
    objectives=(
        "any: which optimizers hold a tensor and whether each steps it with gradients of its "
        "own backward, a mechanism independent of what the losses mean"
    ),
)
def stepped_twice(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Two optimizers hold the same tensors, their steps interleave (most of each one's steps
    lie between the other's first and last), each step of both follows a backward of its own,
    and the shared tensors have gradients at the steps of both: two update rules move them,
    each with its own state. An optimizer built anew for a later phase (its steps after the
    other's) is not judged, nor one whose steps follow no backward (Reptile's outer step, its
    gradient written by hand from the inner loop's), nor one whose tensors were not recorded,
    nor two that hold the very same tensors and take turns in phases (PPG's policy and
    auxiliary optimizers over one network: neither has tensors of its own to keep the other
    off, and the turns are the algorithm's), nor a trunk two losses train with heads of their
    own (SAC-AE's encoder in the critic's Adam and in the reconstruction's; USAD's encoder in
    both autoencoders' Adams, each loss reaching the other's decoder: trunk_heads.py)."""
    series = [s for s in by_optimizer(run) if len(s.steps) >= 2 and run.members_of(s.index)]
    out = []
    for k, a in enumerate(series):
        for b in series[k + 1 :]:
            shared = [i for i in sorted(set(a.members) & set(b.members)) if _judged(run, a, b, i)]
            if (
                shared
                and _interleave(a, b)
                and _interleave(b, a)
                and not _phases(a, b)
                and not trains_own_heads(run, a, b, shared)
            ):
                out.append(_finding(this, run, a, b, shared))
    return out


def _judged(run: WatchRun, a: Series, b: Series, i: int) -> bool:
    """Trainable, and given gradients by a backward before most steps of both."""
    if not run.params[i].requires_grad:
        return False
    return all(_own_gradients(s, i) for s in (a, b))


def _own_gradients(s: Series, i: int) -> bool:
    steps = [r for r in s.steps if r.detail and i < len(r.param_norms)]
    if not steps:
        return False
    fed = [r.backward_calls > 0 and (r.param_norms[i] or 0.0) > 0 for r in steps]
    return statistics.mean(fed) > 0.5


def _interleave(a: Series, b: Series) -> bool:
    first, last = b.steps[0].step, b.steps[-1].step
    inside = [first < r.step < last for r in a.steps]
    return statistics.mean(inside) > 0.5


def _phases(a: Series, b: Series) -> bool:
    """The same tensors in both, and each optimizer's steps come in runs of two or more
    between the other's: phases of one training (PPG), not a step of each per iteration
    (a GAN's D and G, DARTS's weights and architecture), where one of them holds what the
    other trains."""
    if set(a.members) != set(b.members):
        return False
    order = sorted([(r.step, a.index) for r in a.steps] + [(r.step, b.index) for r in b.steps])
    runs: list[int] = []
    for n, (_, k) in enumerate(order):
        if n and order[n - 1][1] == k:
            runs[-1] += 1
        else:
            runs.append(1)
    return min(runs[1:-1] or runs) >= 2


def _finding(this: Rule, run: WatchRun, a: Series, b: Series, shared: list[int]) -> Finding:
    names = [run.params[i].name for i in shared]
    shown = ", ".join(names[:4]) + (f" … (+{len(names) - 4})" if len(names) > 4 else "")
    steps = sorted(r.step for r in (*a.steps[:3], *b.steps[:3]))
    how = (
        "both step them after the same backward, each with its own state: one gradient moves "
        "them twice (twice the learning rate the other parameters of that loss get)"
        if one_backward(run, a, b)
        else "each steps them with the gradients of its own backward and its own state, so "
        "they follow both losses"
    )
    finding = this.finding(
        shown,
        f"{len(names)} parameter(s) sit in both {a.name} and {b.name}, whose steps interleave: "
        f"{shown}; {how}",
        "give each optimizer its own parameters: leave these out of the one that should "
        "not train them (DARTS: the architecture weights out of the weights' optimizer); "
        "if both updates are meant, nothing to fix",
        evidence=(f"steps of both: {step_list(steps)}",),
    )
    return about(finding, steps[:2])
