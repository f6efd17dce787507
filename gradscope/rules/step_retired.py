"""A tensor whose only optimizer stopped stepping while the backward kept reaching it (GS411's
retired case): a teacher pretrained in the same script and then called with gradients, a
backbone whose optimizer was swapped for a head-only one without freezing it. No torch."""

from __future__ import annotations

import itertools

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
