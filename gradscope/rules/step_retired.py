"""A tensor whose only optimizer stopped stepping while the backward kept reaching it (GS411's
retired case): a teacher pretrained in the same script and then called with gradients, a
backbone whose optimizer was swapped for a head-only one without freezing it (a warning);
a head kept fixed above an encoder that a later optimizer adapts, which the backward must
pass through anyway (information: watcher/passed_through.py). No torch."""

from __future__ import annotations

import itertools
from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun

AFTER_INTERVALS = 3
"""Steps of the other optimizers after its last one, in its own longest interval, that say it
stopped rather than steps rarely or in bursts (a lazily regularised discriminator's every
16th, GAIL's discriminator steps between the policy's epochs)."""

AFTER_MIN = 10
"""...and never fewer steps than this."""


def stopped_optimizers(run: WatchRun) -> dict[int, tuple[int, int]]:
    """Each optimizer whose last step came before the run's last step → (that step, its
    longest interval between steps): read once for the run, not per tensor."""
    if not run.steps:
        return {}
    end = run.steps[-1].step
    out = {}
    for k in range(len(run.members)):
        steps = [r.step for r in run.store.of_optimizer(k)]
        if steps and steps[-1] < end:
            gaps = [b - a for a, b in itertools.pairwise(steps)] or [1]
            out[k] = (steps[-1], max(gaps))
    return out


def retired_after(
    run: WatchRun, i: int, stopped: dict[int, tuple[int, int]]
) -> tuple[int, int] | None:
    """(its optimizer, that optimizer's last step) where tensor i is in one optimizer's param
    groups only, that optimizer stopped stepping (`stopped`) while the others ran on for
    several of its longest intervals, and every detailed step since changed the tensor's
    nonzero gradient (a backward reached it: a gradient left from its last step, unchanged,
    is no new one)."""
    owners = [k for k in range(len(run.members)) if i in run.members_of(k)]
    if len(owners) != 1 or owners[0] not in stopped:
        return None
    last, gap = stopped[owners[0]]
    after = [r for r in run.steps if r.step > last and r.detail and i < len(r.param_norms)]
    if len(after) < max(AFTER_MIN, AFTER_INTERVALS * gap):
        return None
    norms = [r.param_norms[i] for r in run.steps if r.step == last and i < len(r.param_norms)]
    norms += [r.param_norms[i] for r in after]
    if all(v is not None and v > 0 for v in norms) and all(
        a != b for a, b in itertools.pairwise(norms)
    ):
        return owners[0], last
    return None


def fixed_above(run: WatchRun, name: str, i: int, last: int, finding: Finding) -> Finding:
    """GS411's retired warning, or information where tensors a later optimizer trains lie
    below the tensor's op in the loss's graph (a head kept fixed above an encoder adapted at
    test time, TTT's): the backward passes through it to reach them anyway."""
    above = passes_to_trained(run, i, last)
    if above is None:
        return replace(finding, severity=Severity.WARNING)
    return replace(
        finding,
        severity=Severity.INFO,
        message=finding.message
        + f"; tensors that {run.optimizer_label(above)} trains lie below its op in the loss's "
        "graph, so the backward passes through it to reach them anyway: a part kept fixed "
        "above the layers that adapt (a self-supervised head over an encoder adapted at "
        "test time), whose own gradients are the only extra",
        advice=f"nothing to fix; requires_grad_(False) on {name} saves computing its own "
        "gradients and keeps them from piling up in .grad",
    )


def passes_to_trained(run: WatchRun, i: int, last: int) -> int | None:
    """An optimizer that stepped after `last` and holds tensors below tensor i's ops in the
    loss's graph (the latest read): the backward passes through i's op to reach what it
    trains, so differentiating through i is needed anyway (a head kept fixed above an
    encoder that adapts); None where nothing trained lies below (a backbone left unfrozen
    under a head-only optimizer, a teacher beside its student)."""
    below = dict(run.state_facts.passes_to).get(i, ())
    for k in below:
        steps = run.store.of_optimizer(k)
        if steps and steps[-1].step > last and i not in run.members_of(k):
            return k
    return None
