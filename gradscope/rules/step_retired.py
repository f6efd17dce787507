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


def retired_after(run: WatchRun, i: int) -> tuple[int, int] | None:
    """(its optimizer, that optimizer's last step) where tensor i is in one optimizer's param
    groups only, that optimizer stopped stepping while the others ran on for several of its
    longest intervals, and every detailed step since changed the tensor's nonzero gradient
    (a backward reached it: a gradient left from its last step, unchanged, is no new one)."""
    owners = [k for k in range(len(run.members)) if i in run.members_of(k)]
    if len(owners) != 1:
        return None
    steps = [r.step for r in run.store.of_optimizer(owners[0])]
    if not steps:
        return None
    last = steps[-1]
    gaps = [b - a for a, b in itertools.pairwise(steps)] or [1]
    after = [r for r in run.steps if r.step > last and r.detail and i < len(r.param_norms)]
    if len(after) < max(AFTER_MIN, AFTER_INTERVALS * max(gaps)):
        return None
    norms = [r.param_norms[i] for r in run.steps if r.step == last and i < len(r.param_norms)]
    norms += [r.param_norms[i] for r in after]
    if all(v is not None and v > 0 for v in norms) and all(
        a != b for a, b in itertools.pairwise(norms)
    ):
        return owners[0], last
    return None
