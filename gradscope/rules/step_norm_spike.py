"""GS403: the total gradient norm spiked, by GS402's test (rules/steps.py), with the layers that
drove it, whether the update spiked first, and when the spikes are information: a clip that
absorbed them, a game of optimizers' turns, a moving regression target's jumps. No torch."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from itertools import pairwise

from gradscope.config import Thresholds
from gradscope.findings import Finding, Mark, Rule, Severity
from gradscope.fmt import num
from gradscope.rules import side_steps, swap_steps
from gradscope.rules.norm_level import moved_level
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.spikes_by_design import (
    RECOVERY_STEPS,
    Spike,
    opponent_moved,
    recovered_at_once,
    stands_apart,
)
from gradscope.rules.step_common import (
    MAD_SIGMA,
    Series,
    about,
    by_optimizer,
    finite,
    group_norms,
    step_list,
    window,
)
from gradscope.rules.step_meaning import quasi_newton_advice
from gradscope.rules.steps import batch_apart, series_spikes, spike_advice
from gradscope.steps.records import StepRecord, WatchRun


@rule(
    "GS403",
    "norm-spike",
    Severity.WARNING,
    "spike",
    Stage.WATCH,
    "watch: the total gradient norm jumped far above its rolling median; the layers that drove "
    "it, and whether the update spiked first",
    example="one corrupted batch at step 150",
    fix="clip the gradient norm (torch.nn.utils.clip_grad_norm_), lower the learning rate or "
    "lengthen warm-up; look at the batch of that step",
    thresholds=(
        "spike-window",
        "spike-sigma",
        "spike-min-ratio",
        "spike-min-history",
        "spike-early-ratio",
    ),
    command="gradscope watch gradscope/examples/train_buggy.py",
    objectives=(
        "any: the total gradient norm, not the loss; in a game of optimizers (a GAN's "
        "alternating steps) spikes that come back are information: each player's gradient "
        "jumps as the other moves; a norm that moves to a new level while the loss falls (a "
        "likelihood whose learned scale sharpens: 1/sigma^2) is a trend, not spikes"
    ),
    mark=Mark("norm spike", "^"),
)
def norm_spike(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The total gradient norm (before clipping, unscaled) spikes by GS402's test (spike-window,
    spike-sigma, spike-min-ratio, spike-min-history, spike-early-ratio). The evidence names the
    layers that drove it (their norm against their own rolling median) and whether the sampled
    update norm spiked first, which points at the optimizer's state rather than one batch.
    Information, not a warning, in a game of optimizers (a GAN: the series' steps alternate with
    another optimizer's) where the series' loss did not spike with its gradient (one at its
    steps' level before, a term switched on earlier, did not) or spiked as a turn too, every
    turn of the norm seen came back at least halfway within 5 steps, none far above the others,
    and nothing went non-finite: each player's gradient jumps when the other's moves (a last
    burst the run ended on is not held against it); where every spike came at a step whose
    loss spiked by design (GS402's moving regression target); and for lone spikes the loss did
    not feel whose steps were bounded (Adam's; SGD's lr times the norm, no spike among the
    steps before: a schedule cut the lr since). A corrupted batch (far above the others;
    outside a game, its loss spiking too) and a spike followed by NaN stay warnings. Each
    line that called backward is a series of its own (rules/side_steps.py)."""
    out = []
    for s in (part for whole in by_optimizer(run) for part in side_steps.parts(run, whole)):
        steps, found = series_spikes(s, t, "norm")
        if not found:
            continue
        i, value, med = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])
        at = steps[i]
        window = steps[max(0, i - int(t.spike_window)) : i]
        where = [steps[j].step for j, _, _ in found]
        evidence = [f"spike steps: {step_list(where)}"]
        drivers = _drivers(run, s, at, window)
        if drivers:
            evidence.append("layers that drove it (norm / own rolling median): " + drivers)
        evidence.append(_update_first(run, s, at, t))
        absorbed = _absorbed(s, [steps[j] for j, _, _ in found], t)
        early = moved_level(steps, (i, value, med), t)
        clipped = f"; the script's clip (max_norm {num(at.max_norm)}) absorbed every one, "
        finding = this.finding(
            s.subject("total-grad-norm"),
            s.say(
                f"the gradient norm spiked at {len(found)} step(s): step {at.step} reached "
                f"{num(value)} against a rolling median of {num(med)}{early}"
                + (clipped + "and the loss kept falling" if absorbed else "")
            ),
            "nothing to do: clipping did its job" if absorbed else _advice(run, s, at),
            value=value,
            threshold=med,
            evidence=tuple(evidence),
        )
        if (swap := swap_steps.after_swap(run, where)) is not None or absorbed:
            out.append(about(_information(finding, swap), where))
        else:
            out.append(_norm_judged(run, s, t, (steps, found), finding, where))
    return out


def _advice(run: WatchRun, s: Series, at: StepRecord) -> str:
    """The spike's advice; for LBFGS without a line search, which has no batch to look at and
    no warm-up, and whose lr times its curvature-scaled step overshot: the line search."""
    settings = run.settings_of(s.index)
    if settings is not None and settings.sizes_own_step and not settings.evaluations:
        if not any(g.line_search for g in settings.groups):
            return quasi_newton_advice(settings)
    return spike_advice(s, at)


def _information(finding: Finding, swap: int | None) -> Finding:
    """Information: the clip absorbed it (swap None), or it came right after the
    optimizer's tensors were swapped."""
    if swap is None:
        return replace(finding, severity=Severity.INFO)
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}, right after the optimizer's tensors were swapped for new "
        f"ones after step {swap}: the norm is taken over the new tensors (points added or "
        "pruned), not comparable with the steps before",
        advice="nothing to do for a swap meant (densification, pruning); if the jump "
        "persists, look at how the new tensors are initialised",
    )


def _norm_judged(
    run: WatchRun,
    s: Series,
    t: Thresholds,
    spiked: tuple[list[StepRecord], list[Spike]],
    finding: Finding,
    where: list[int],
) -> Finding:
    """The GS403 finding as information where its spikes are by design or a lone spike an
    adaptive optimizer bounded, or named at the batch that stands apart from a moving
    target's own spikes."""
    steps, found = spiked
    facts, advice = _by_design(run, s, t, steps, found)
    if facts:
        at = steps[max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])[0]]
        finding = replace(
            finding,
            severity=Severity.INFO,
            advice=f"{advice}; if they grow instead, {spike_advice(s, at)}",
            evidence=(*finding.evidence, facts),
        )
        return about(finding, where)
    if _bounded_by_optimizer(run, s, t, steps, [j for j, _, _ in found]):
        top = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])[0]
        return about(_normalised(finding, run, s, steps, top, t), where)
    odd, apart = _loss_apart(run, s, t, steps, found)
    return about(batch_apart(finding, odd, apart), odd) if apart else about(finding, where)


def _by_design(
    run: WatchRun, s: Series, t: Thresholds, steps: list[StepRecord], found: list[Spike]
) -> tuple[str, str]:
    """(the facts, the advice) when the norm's spikes are information: a game's turns, or
    each at a step whose loss spiked by design (a moving regression target: the gradient of
    a squared error grows with the error); ("", "") if not."""
    loss_steps, loss_found = series_spikes(s, t, "loss")
    at = {loss_steps[i].step for i, _, _ in loss_found}
    jumps = _jumped_there(loss_steps, loss_found, t)
    game = opponent_moved(run, s, steps, found, t, (loss_steps, jumps))
    if game:
        return game, (
            "not a fault by itself: in a game of optimizers (a GAN's discriminator and "
            "generator) each one's gradient jumps when the other's moves change what it sees, "
            "and comes back"
        )
    target = recovered_at_once(run, s, loss_steps, loss_found, t)
    if not target or any(steps[i].step not in at for i, _, _ in found):
        return "", ""
    return (
        f"each of its {len(found)} spike(s) came at a step whose loss spiked by design: {target}",
        "not a fault by itself: a regression loss whose targets move (bootstrapped values, TD "
        "targets) jumps where an episode ends, and its gradient with it",
    )


def _jumped_there(steps: list[StepRecord], found: list[Spike], t: Thresholds) -> list[Spike]:
    """The loss's spikes less those at a level the loss already held at the steps before
    (their median within spike-min-ratio of it): a rise the rolling median still lags (a
    term switched on earlier, as a GAN's adversarial loss after a warm-up on
    reconstruction alone), which did not come with the norm's jump at that step."""
    values = [r.loss or 0.0 for r in steps]
    return [
        f
        for f in found
        if f[0] < RECOVERY_STEPS
        or f[1] > t.spike_min_ratio * statistics.median(values[f[0] - RECOVERY_STEPS : f[0]])
    ]


def _loss_apart(
    run: WatchRun, s: Series, t: Thresholds, steps: list[StepRecord], found: list[Spike]
) -> tuple[list[int], str]:
    """GS402's spikes that stand apart from a moving target's, when every norm spike came
    at a loss spike and the largest at one of those."""
    loss_steps, loss_found = series_spikes(s, t, "loss")
    odd, facts = stands_apart(run, s, loss_steps, loss_found, t)
    at = {loss_steps[i].step for i, _, _ in loss_found}
    top = steps[max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])[0]].step
    if not odd or top not in odd or any(steps[i].step not in at for i, _, _ in found):
        return [], ""
    return [x for x in odd if x in {steps[i].step for i, _, _ in found}], facts


def norm_spikes_by_design(run: WatchRun, s: Series, t: Thresholds) -> bool:
    """GS403 calls the series' norm spikes information (a game's turns, a moving target)."""
    steps, found = series_spikes(s, t, "norm")
    return bool(found) and bool(_by_design(run, s, t, steps, found)[0])


def norm_spikes_bounded(run: WatchRun, s: Series, t: Thresholds) -> bool:
    """GS403 calls the series' norm spikes lone steps its optimizer bounded (no loss
    spike, the loss kept falling)."""
    steps, found = series_spikes(s, t, "norm")
    return bool(found) and _bounded_by_optimizer(run, s, t, steps, [j for j, _, _ in found])


def _absorbed(s: Series, spiked: list[StepRecord], t: Thresholds) -> bool:
    """Every spike was clipped to max_norm, no loss spike came with them, and the loss
    after them kept falling: the clip bounded the steps, as it is there to."""
    if not spiked or any(r.max_norm is None or not r.clipped or r.scaled_clip for r in spiked):
        return False
    return _loss_unharmed(s, t)


def _bounded_by_optimizer(
    run: WatchRun, s: Series, t: Thresholds, steps: list[StepRecord], spiked: list[int]
) -> bool:
    """Each spike one step alone (its neighbours none), no loss spike, nothing non-finite,
    the loss kept falling, and the step the spike made bounded: under an optimizer whose
    step is about the lr whatever the gradient's scale (Adam's family, Lion: the spike
    enters Adam's first moment at 1 - beta1) or d·lr (Prodigy: d its own estimate), or
    under SGD, whose step is the lr times the gradient, where that step was no spike among
    the run's own steps before it (the lr had fallen since the steps it is as large as).
    One batch's large gradient moved the weights by a step the run shows did no harm;
    repeated or lasting jumps stay warnings."""
    settings = run.settings_of(s.index)
    if settings is None or not spiked:
        return False
    if not settings.bounded and any(sgd_step(steps, j, t) is None for j in spiked):
        return False
    if any(b - a < 2 for a, b in pairwise(spiked)):
        return False
    if any(not finite(r.loss) or not finite(r.grad_norm) for r in s.live()):
        return False
    return _loss_unharmed(s, t)


def sgd_step(steps: list[StepRecord], j: int, t: Thresholds) -> float | None:
    """Step j's lr times its gradient norm over the median of the steps' before it, where
    that is no spike among them by GS403's own test against all of them (not a window: a
    schedule's steps at a higher lr count); None where it is one, or the lr is unknown."""
    sizes = [max(r.lrs) * r.grad_norm if r.lrs and r.grad_norm else 0.0 for r in steps[: j + 1]]
    if len(sizes) <= t.spike_min_history or min(sizes) <= 0:
        return None
    logs = [math.log(x) for x in sizes[:-1]]
    med = statistics.median(logs)
    sigma = MAD_SIGMA * statistics.median(abs(x - med) for x in logs)
    jump = math.log(sizes[-1]) - med
    if jump > t.spike_sigma * sigma and jump > math.log(t.spike_min_ratio):
        return None
    return math.exp(jump)


def _normalised(
    finding: Finding, run: WatchRun, s: Series, steps: list[StepRecord], top: int, t: Thresholds
) -> Finding:
    settings = run.settings_of(s.index)
    kind = settings.kind if settings is not None else "its optimizer"
    at = steps[top]
    ratio = sgd_step(steps, top, t) if settings is not None and not settings.bounded else None
    size = "d·lr (d its own estimate)" if settings and settings.update == "adapted" else "the lr"
    why = (
        f"under {kind} each element's step is about {size} whatever the gradient's scale"
        if ratio is None
        else f"under {kind} the step is the lr times the gradient: at step {at.step}'s lr "
        f"({num(max(at.lrs))}) it was {ratio:.1f}× the run's median step, as steps at its "
        "higher lr before were"
    )
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; {why}, each spike was one step's, and the loss kept falling",
        advice="nothing to do for a lone spike: its step was bounded; if spikes "
        f"repeat or the loss jumps with them, {spike_advice(s, at)}",
    )


def _loss_unharmed(s: Series, t: Thresholds) -> bool:
    """No loss spike in the series, and its loss fell from its first window to its last."""
    _, loss_spikes = series_spikes(s, t, "loss")
    if loss_spikes:
        return False
    steps = [r for r in s.live() if finite(r.loss)]
    losses = [r.loss for r in steps if r.loss is not None]
    w = window(len(losses))
    if len(losses) < 2 * w:
        return False
    return statistics.median(losses[-w:]) < statistics.median(losses[:w])


def _drivers(run: WatchRun, s: Series, at: StepRecord, window: list[StepRecord]) -> str:
    now = group_norms(run, at, s.members)
    history = [group_norms(run, r, s.members) for r in window]
    ranked = []
    for group, value in now.items():
        past = [h[group] for h in history if group in h]
        med = statistics.median(past) if past else 0.0
        if med > 0:
            ranked.append((value / med, group, value))
    ranked.sort(reverse=True)
    return ", ".join(f"{g} {num(v)} ({x:.1f}×)" for x, g, v in ranked[:3])


def _update_first(run: WatchRun, s: Series, at: StepRecord, t: Thresholds) -> str:
    sampled = [r for r in s.live() if r.update_norm is not None]
    before = [r for r in sampled if r.step <= at.step]
    for k, r in enumerate(before):
        base = [x.update_norm for x in before[max(0, k - 16) : k] if x.update_norm]
        if len(base) < 3 or r.step < at.step - t.spike_window:
            continue
        med = statistics.median(base)
        if r.update_norm is not None and med > 0 and r.update_norm > t.spike_min_ratio * med:
            if r.step < at.step:
                return (
                    f"the update norm spiked first: step {r.step}, {num(r.update_norm)} "
                    f"({r.update_norm / med:.1f}× its median), {at.step - r.step} steps "
                    "before the gradient: suspect the optimizer state, not one batch"
                )
            return f"the update norm spiked at the same step ({num(r.update_norm)})"
    return (
        f"the update norm did not spike before the gradient norm (its total measured at "
        f"each of the first 10 steps, then every {run.update_every})"
    )
