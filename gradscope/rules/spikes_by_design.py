"""Spikes by design, told from faults by what followed them (GS402, GS403): a regression
target that moves (bootstrapped values jump at every episode end) and a game whose players
take turns (a GAN's discriminator). Each returns the facts that make the spikes
information, or "" where they are not. No torch."""

from __future__ import annotations

import math
import statistics

from gradscope.rules.step_common import Series, finite, regression_like
from gradscope.steps.records import StepRecord, WatchRun

RECOVERY_STEPS = 5
"""Steps a spike (consecutive spiking steps) may last, and the steps after it (the first
that are not spikes themselves, within twice as many) whose median must be at least halfway
back to the median it jumped from, for it to have recovered at once."""


def recovered_at_once(
    run: WatchRun, s: Series, steps: list[StepRecord], found: list[tuple[int, float, float]]
) -> str:
    """The facts when the spikes are those of a moving regression target: 3 or more that
    were each over within RECOVERY_STEPS (a last one the run ended on aside), no non-finite
    loss, a regression or unrecognised term; "" if not."""
    if len(found) < 3 or not regression_like(run, s):
        return ""
    if any(r.loss is not None and not math.isfinite(r.loss) for r in s.steps):
        return ""
    losses = [r.loss or 0.0 for r in steps]
    bursts = _bursts(found)
    spiked = {i for i, _, _ in found}
    seen = [_came_back(b, losses, spiked) for b in bursts]
    unseen = seen[-1] is None
    if unseen:
        seen.pop()
    if len(seen) < 3 or not all(seen):
        return ""
    kind = run.loss_kind(s.index)
    what = kind.describe() if kind is not None else "not read"
    return (
        f"each of the {len(seen)} spikes lasted at most {RECOVERY_STEPS} steps and the loss "
        f"came back at least halfway to its median within {RECOVERY_STEPS} steps after it "
        f"(the loss: {what}); none was followed by a non-finite loss"
        + (
            f"; the last, at step {steps[bursts[-1][0][0]].step}, ended the run before it "
            "could be seen to come back"
            if unseen
            else ""
        )
    )


def _bursts(found: list[tuple[int, float, float]]) -> list[list[tuple[int, float, float]]]:
    """The spikes grouped into runs of consecutive steps."""
    out: list[list[tuple[int, float, float]]] = []
    for f in sorted(found):
        if out and f[0] == out[-1][-1][0] + 1:
            out[-1].append(f)
        else:
            out.append([f])
    return out


def _came_back(
    burst: list[tuple[int, float, float]], losses: list[float], spiked: set[int]
) -> bool | None:
    """The burst lasted at most RECOVERY_STEPS and the median of the next RECOVERY_STEPS
    steps that are not spikes is at least halfway back to the median it jumped from; None:
    not yet, and the run ended before those steps."""
    end, base = burst[-1][0], burst[0][2]
    peak = max(v for _, v, _ in burst)
    near = range(end + 1, min(len(losses), end + 1 + 2 * RECOVERY_STEPS))
    after = [losses[j] for j in near if j not in spiked][:RECOVERY_STEPS]
    if len(burst) > RECOVERY_STEPS:
        return False
    if after and statistics.median(after) - base <= (peak - base) / 2:
        return True
    return None if len(after) < RECOVERY_STEPS and near.stop == len(losses) else False


def opponent_moved(
    run: WatchRun, s: Series, steps: list[StepRecord], found: list[tuple[int, float, float]]
) -> str:
    """The facts when the spikes are those of a game: the series' steps alternate with
    another optimizer's, each burst of spikes that could be seen came back at once (the
    last one the run ended on aside), and no loss or gradient of the series went non-finite;
    "" if not."""
    mine = {r.step for r in s.steps}
    others = [r.step for r in run.steps if r.step not in mine]
    if not others or not (min(others) < max(mine) and max(others) > min(mine)):
        return ""
    if any(not finite(r.loss) or not finite(r.grad_norm) for r in s.steps if r.loss is not None):
        return ""
    norms = [r.grad_norm for r in steps]
    seen = [_came_back(b, norms, {i for i, _, _ in found}) for b in _bursts(found)]
    unseen = seen[-1] is None
    if unseen:
        seen.pop()
    if not all(seen):
        return ""
    return (
        f"its steps alternate with another optimizer's; {len(seen)} burst(s) of spikes came "
        f"back at least halfway within {RECOVERY_STEPS} steps, none went non-finite"
        + ("; the last ended the run before it could be seen to come back" if unseen else "")
    )
