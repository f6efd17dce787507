"""Spikes by design, told from faults by what followed them (GS402, GS403): a regression
target that moves (bootstrapped values jump at every episode end, and the gradient with
them) and a game whose players take turns (a GAN's discriminator). Such spikes recur at one
scale: one far above the others is a fault among them (a corrupted batch). Each returns the
facts that make the spikes information, or "" where they are not. No torch."""

from __future__ import annotations

import math
import statistics

from gradscope.config import Thresholds
from gradscope.rules.own_targets import own_predictions
from gradscope.rules.step_common import MAD_SIGMA, Series, finite, regression_like, step_list
from gradscope.steps.records import StepRecord, WatchRun

RECOVERY_STEPS = 5
"""Steps a spike (consecutive spiking steps) may last, and the steps after it (the first
that are not spikes themselves, within twice as many) whose median must be at least halfway
back to the median it jumped from, for it to have recovered at once."""


RECURRING = 3
"""Spikes (or a game's turns) that make a pattern by design: fewer are events."""

Spike = tuple[int, float, float]
"""(index in the series' steps, value, the rolling median it jumped from)."""


def held_level(s: Series, steps: list[StepRecord], values: list[float], i: int) -> bool:
    """The gradient norm rose at index i to a level it then held (its next RECOVERY_STEPS
    steps' median at least half of it, all finite) while the loss went on falling (their
    median loss below the steps' before it): a trend crossing the spike line (a schedule's
    rising lr, logits that sharpen), not a spike, which comes back; nor a blow-up, whose
    loss rises with it. A rise the run ended on is judged as a spike."""
    after = steps[i + 1 : i + 1 + RECOVERY_STEPS]
    if (
        len(after) < RECOVERY_STEPS
        or statistics.median(values[i + 1 : i + 1 + RECOVERY_STEPS]) < values[i] / 2
    ):
        return False
    span = [r for r in s.live() if steps[i].step < r.step <= after[-1].step]
    if any(not finite(r.loss) or not finite(r.grad_norm) for r in span):
        return False
    before = [r.loss for r in steps[max(0, i - RECOVERY_STEPS) : i] if r.loss is not None]
    later = [r.loss for r in after if r.loss is not None]
    return bool(before) and bool(later) and statistics.median(later) < statistics.median(before)


def recovered_at_once(
    run: WatchRun,
    s: Series,
    steps: list[StepRecord],
    found: list[Spike],
    t: Thresholds,
    held: list[Spike] | None = None,
) -> str:
    """The facts when the spikes are those of a moving regression target: 3 or more that
    were each over within RECOVERY_STEPS (a last one the run ended on aside), of one scale,
    no non-finite loss, a regression or unrecognised term; "" if not. `held`: the jumps of a
    climb the loss then held, where its level says nothing alone (steps.loss_spikes left
    them out): the same moving target's, they count toward the pattern and its scale."""
    held = held or []
    pattern = found + held
    if len(pattern) < RECURRING or not regression_like(run, s) or outlier(pattern, t):
        return ""
    if any(r.loss is not None and not math.isfinite(r.loss) for r in s.steps):
        return ""
    losses = [r.loss or 0.0 for r in steps]
    bursts = _bursts(found)
    spiked = {i for i, _, _ in found}
    replayed = own_predictions(run) is not None
    seen = [_came_back(b, losses, spiked, replayed) for b in bursts]
    unseen = seen[-1] is None
    if unseen:
        seen.pop()
    if not seen or len(seen) + len(_bursts(held)) < RECURRING or not all(seen):
        return ""
    kind = run.loss_kind(s.index)
    what = kind.describe() if kind is not None else "not read"
    return (
        f"each of the {len(seen)} spikes lasted at most {RECOVERY_STEPS} steps and "
        + ("a batch" if replayed else "the loss")
        + f" came back at least halfway to its median within {RECOVERY_STEPS} steps after it "
        f"(the loss: {what}); none was followed by a non-finite loss"
        + (f"; {len(held)} more were steps of a climb the loss then held" if held else "")
        + (
            f"; the last, at step {steps[bursts[-1][0][0]].step}, ended the run before it "
            "could be seen to come back"
            if unseen
            else ""
        )
    )


def recovered_advice(s: Series) -> str:
    """Why spikes that came back at once are by design: a loss that went below 0 is a
    density's NLL (no squared error can), whose learned scale makes one sample far off in
    its units lift a batch; else a moving target's, at an episode's end."""
    if any(r.loss is not None and r.loss < 0 for r in s.steps):
        return (
            "not a fault by itself: a likelihood whose scale is learned (a Gaussian NLL with "
            "a variance or log-variance head) jumps at a batch holding a sample several of "
            "its scales from the mean and comes back at once, as a regression loss whose "
            "targets move (bootstrapped values, TD targets) does where an episode ends; if "
            "neither, look at the batches of those steps"
        )
    return (
        "not a fault by itself: a regression loss whose targets move (bootstrapped values, "
        "TD targets) jumps where an episode ends and comes back at once; if its targets are "
        "fixed data, look at the batches of those steps"
    )


def outlier(found: list[Spike], t: Thresholds) -> bool:
    """One spike far above the others, by the spike test itself (spike-sigma robust sigmas
    and spike-min-ratio over their median jump, on a log scale): a moving target's jumps are
    bounded by the values the model predicts, a game's by what one turn changes; a batch
    scaled by mistake is not."""
    jumps = [math.log(v / m) for _, v, m in found if v > 0 and m > 0]
    if len(jumps) < RECURRING:
        return False
    med = statistics.median(jumps)
    sigma = MAD_SIGMA * statistics.median(abs(j - med) for j in jumps)
    return max(jumps) - med > max(t.spike_sigma * sigma, math.log(t.spike_min_ratio))


def stands_apart(
    run: WatchRun, s: Series, steps: list[StepRecord], found: list[Spike], t: Thresholds
) -> tuple[list[int], str]:
    """The spikes of a moving target but for those far above the others: (their steps, the
    facts), the largest first; ([], "") where the rest are no such pattern either."""
    rest = sorted(found, key=lambda f: math.log(f[1] / f[2]) if f[1] > 0 < f[2] else 0.0)
    odd: list[Spike] = []
    while outlier(rest, t):
        odd.append(rest.pop())
    if not odd or not recovered_at_once(run, s, steps, sorted(rest), t):
        return [], ""
    where = [steps[i].step for i, _, _ in odd]
    which = f"step {where[0]} stands" if len(where) == 1 else f"steps {step_list(where)} stand"
    return where, (
        f"{which} far above the loss's other {len(rest)} spikes, which recur at one scale "
        "and come back at once as a moving target's do (by design)"
    )


def _bursts(found: list[Spike]) -> list[list[Spike]]:
    """The spikes grouped into runs of consecutive steps."""
    out: list[list[Spike]] = []
    for f in sorted(found):
        if out and f[0] == out[-1][-1][0] + 1:
            out[-1].append(f)
        else:
            out.append([f])
    return out


def _came_back(
    burst: list[Spike], losses: list[float], spiked: set[int], replayed: bool = False
) -> bool | None:
    """The burst lasted at most RECOVERY_STEPS and the median of the next RECOVERY_STEPS
    steps that are not spikes is at least halfway back to the median it jumped from; None:
    not yet, and the run ended before those steps. For a model `replayed` on its own
    predictions (own_targets.own_predictions), the least of those steps: its batches are
    drawn from a replay of what it did, so the transitions an episode's end added come back
    in a share of the batches until it fits them, and a batch without them, back at the
    level, shows the model still fits the rest (a blow-up lifts every batch)."""
    end, base = burst[-1][0], burst[0][2]
    peak = max(v for _, v, _ in burst)
    near = range(end + 1, min(len(losses), end + 1 + 2 * RECOVERY_STEPS))
    after = [losses[j] for j in near if j not in spiked][:RECOVERY_STEPS]
    if len(burst) > RECOVERY_STEPS:
        return False
    level = min if replayed else statistics.median
    if after and level(after) - base <= (peak - base) / 2:
        return True
    return None if len(after) < RECOVERY_STEPS and near.stop == len(losses) else False


def _turns(burst: list[Spike], norms: list[float]) -> list[list[Spike]]:
    """A burst of a game split into its turns: a turn ends at the step its norm falls at
    least halfway back from the turn's peak to the median it jumped from, and the next
    starts where the norm rises again. The opponent may move again before the norm falls
    under the spike line, so consecutive spiking steps can hold several turns."""
    turns: list[list[Spike]] = [[burst[0]]]
    falling = False
    for f in burst[1:]:
        turn = turns[-1]
        peak, base = max(v for _, v, _ in turn), turn[0][2]
        if falling and f[1] > norms[f[0] - 1]:
            turns.append([f])
            falling = False
        elif not falling and f[1] - base <= (peak - base) / 2:
            falling = True
        elif not falling:
            turn.append(f)
    return turns


def _joined(bursts: list[list[Spike]], norms: list[float]) -> list[list[Spike]]:
    """Bursts a short gap apart (fewer than RECOVERY_STEPS steps) whose norm stayed above
    the first one's halfway line in between, joined: one turn the spike line cut in two (a
    step just under it), not a turn that came back and another."""
    out: list[list[Spike]] = []
    for burst in bursts:
        if out:
            last = out[-1]
            gap = norms[last[-1][0] + 1 : burst[0][0]]
            base = last[0][2]
            line = base + (max(v for _, v, _ in last) - base) / 2
            if gap and len(gap) < RECOVERY_STEPS and min(gap) > line:
                last.extend(burst)
                continue
        out.append(list(burst))
    return out


def _turn_came_back(turn: list[Spike], norms: list[float], spiked: set[int], until: int):
    """The last turn of a burst came back: judged by the steps after the burst, or, where
    the next burst (at index `until`) begins sooner than RECOVERY_STEPS steps after it, by
    whether the norm fell at least halfway back before it: the other player moved again
    before the norm could settle, as inside a burst (`_turns`)."""
    end, base = turn[-1][0], turn[0][2]
    gap = norms[end + 1 : until]
    if len(turn) <= RECOVERY_STEPS and gap and len(gap) < RECOVERY_STEPS < len(norms) - end:
        return min(gap) - base <= (max(v for _, v, _ in turn) - base) / 2
    return _came_back(turn, norms, spiked)


def opponent_moved(
    run: WatchRun,
    s: Series,
    steps: list[StepRecord],
    found: list[Spike],
    t: Thresholds,
    loss_spikes: tuple[list[StepRecord], list[Spike]],
) -> str:
    """The facts when the spikes are those of a game: the series' steps alternate with
    another optimizer's, every turn (a rise and its fall) that could be seen came back at
    least halfway within RECOVERY_STEPS (a last one the run ended on is not held against
    it), none far above the others, no loss or gradient of the series went non-finite, and
    its loss either did not spike with them (what changed is what it sees, the other
    player's output) or spiked as a turn of the game (`_fooled`); "" if not."""
    mine = {r.step for r in s.steps}
    others = [r.step for r in run.steps if r.step not in mine]
    if not others or not (min(others) < max(mine) and max(others) > min(mine)):
        return ""
    if any(not finite(r.loss) or not finite(r.grad_norm) for r in s.steps if r.loss is not None):
        return ""
    if outlier(found, t):
        return ""
    fooled = _fooled(loss_spikes, {steps[i].step for i, _, _ in found}, t)
    if fooled is None:
        return ""
    norms = [r.grad_norm for r in steps]
    spiked = {i for i, _, _ in found}
    seen: list[bool | None] = []
    bursts = _joined(_bursts(found), norms)
    for burst, after in zip(bursts, [b[0][0] for b in bursts[1:]] + [len(norms)], strict=True):
        turns = _turns(burst, norms)
        tail = [f for f in burst if f[0] >= turns[-1][0][0]]
        seen += [len(x) <= RECOVERY_STEPS for x in turns[:-1]]  # each came back by its end
        seen.append(_turn_came_back(tail, norms, spiked, after))
    unseen = seen[-1] is None
    if unseen:
        seen.pop()
    if not all(seen):
        return ""
    return (
        f"its steps alternate with another optimizer's; {fooled}; {len(seen)} turn(s) of its "
        f"gradient norm (a rise and its fall) came back at least halfway within "
        f"{RECOVERY_STEPS} steps, none far above the others, none went non-finite"
        + ("; the last ended the run before it could be seen to come back" if unseen else "")
    )


def _fooled(loss_spikes: tuple[list[StepRecord], list[Spike]], at: set[int], t: Thresholds):
    """How the player's loss met its gradient's spikes (the steps `at`): not at all, or as
    turns of the game, each over within RECOVERY_STEPS and none far above the loss's other
    spikes (the other player's move fooled it: a GAN's discriminator scores real images low
    after the generator's jump, then learns back); None where a loss spike that came with
    the gradient held or stood apart (a batch scaled by mistake, a collapse)."""
    steps, found = loss_spikes
    hit = {i for i, _, _ in found if steps[i].step in at}
    if not hit:
        return "its loss did not spike with its gradient"
    if outlier(found, t):
        return None
    losses = [r.loss or 0.0 for r in steps]
    spiked = {i for i, _, _ in found}
    if any(
        _came_back(b, losses, spiked) is False for b in _bursts(found) if hit & {f[0] for f in b}
    ):
        return None
    return (
        f"its loss spiked with its gradient at {len(hit)} step(s) and came back as a turn "
        "does, none far above its other spikes (the other player's move fooled it)"
    )
