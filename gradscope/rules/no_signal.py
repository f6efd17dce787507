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


def silent_since(run: WatchRun, s: Series) -> int | None:
    """The step from which every tensor of the series that had gradients got only zeros
    (a gradient, all of it 0: the graph still reaches it) while every loss read was
    exactly 0; None otherwise."""
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
