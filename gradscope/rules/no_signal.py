"""Every tensor an optimizer trains got only zero gradients from one same step to the end,
while its loss was exactly 0 at each of those steps: each batch gave the objective no
signal, rather than a cut graph (GS417 then says so, as information). GRPO's batches whose
every group drew one reward (every advantage 0, the task solved or never once solved), a
margin met by every pair. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.rules.step_common import Series
from gradscope.steps.records import WatchRun


def zeros_since(run: WatchRun, s: Series) -> tuple[int | None, int | None]:
    """(silent_since, saturated_since): the step of one of them, the other None."""
    return silent_since(run, s), saturated_since(run, s)


def read_zeros(finding: Finding, zeros: tuple[int | None, int | None]) -> Finding:
    """GS417's finding read by zeros_since: information where the batches gave no signal,
    a warning naming the scale where a logistic loss saturated, as it was otherwise."""
    silent, overflowed = zeros
    if silent is not None:
        return as_information(finding, silent)
    return finding if overflowed is None else as_saturated(finding, overflowed)


def silent_since(run: WatchRun, s: Series) -> int | None:
    """The step from which every tensor of the series that had gradients got only zeros
    (a gradient, all of it 0: the graph still reaches it) while every loss read was
    exactly 0, a loss that is not a saturated one; None otherwise."""
    step = _zero_since(run, s)
    return None if step is None or saturated(run, s) else step


def saturated_since(run: WatchRun, s: Series) -> int | None:
    """silent_since's step where the loss is a logistic one: saturated, not signal-free."""
    step = _zero_since(run, s)
    return step if step is not None and saturated(run, s) else None


def _zero_since(run: WatchRun, s: Series) -> int | None:
    """The step from which every tensor got only zeros at a loss of exactly 0."""
    since = set()
    for i in s.members:
        had = run.tensors.learned(s.index, i)
        if had is None:
            continue
        if had.since_step < 0 or had.none_after or not had.zero_after:
            return None  # still learning, or None: cut off, not silent
        since.add(had.since_step)
    if len(since) != 1:
        return None
    (step,) = since
    after = [r.loss for r in s.live() if r.step >= step]
    return step if after and all(x == 0 for x in after) else None


def saturated(run: WatchRun, s: Series) -> bool:
    """The loss is a logistic one (-log sigmoid(x), softplus): it is 0 only where x
    overflowed its float (x > ~17 in float32), so a batch of exact zeros is a margin scaled
    past saturation (DPO's beta of 1000, a tiny temperature), not a signal-free batch."""
    kind = run.loss_kind(s.index)
    return kind is not None and any(term.kind == "logistic_loss" for term in kind.terms)


def as_information(finding: Finding, step: int) -> Finding:
    """GS417 on a tensor of such a series: the objective gave no signal, not a fault."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}, as every tensor this optimizer trains, while the loss "
        f"was exactly 0 at every step from {step}: each batch gave the objective no signal "
        "(GRPO: every group drew one reward, so every advantage is 0; a margin met by every "
        "pair), not a cut graph",
        advice="fine if the task is solved (the reward at its top); if the reward is stuck "
        "lower, draw more varied samples (a higher temperature, larger groups) or drop the "
        "groups of one reward from the batch (DAPO's dynamic sampling)",
    )


def as_saturated(finding: Finding, step: int) -> Finding:
    """GS417 on a tensor of such a series: the logistic loss saturated, its scale is wrong."""
    return replace(
        finding,
        message=f"{finding.message}, as every tensor this optimizer trains, while the logistic "
        f"loss (-log sigmoid) read exactly 0 at every step from {step}: it is 0 only where its "
        "input overflowed, every margin scaled past saturation",
        advice="lower the scale the margin is multiplied by (DPO's beta, typically 0.1; a "
        "contrastive temperature raised, a reward scaled down), or lower the learning rate if "
        "one step drove the margins there",
    )
