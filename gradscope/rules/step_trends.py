"""Trends over a run (GS404, GS405): a gradient norm that grows steadily, a layer's that
fades while the loss does not fall. Pure functions of a `WatchRun`, no torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules import floor_stop, loss_at_rest, sharpening
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import (
    Series,
    by_optimizer,
    clip_note,
    finite,
    group_norms,
    module_of,
)
from gradscope.steps.records import StepRecord, WatchRun


# -- GS404 / GS405 ---------------------------------------------------------------------
def _spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        out = [0.0] * len(v)
        for rank, i in enumerate(order):
            out[i] = float(rank)
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 0.0


@rule(
    "GS404",
    "exploding-trend",
    Severity.ERROR,
    "exploding",
    Stage.WATCH,
    "watch: the gradient norm rose steadily by a large factor over the last steps",
    example="a learning rate a little too high for a model without normalisation",
    fix="lower the learning rate, clip the gradient norm or add normalisation: the trend ends in "
    "NaN",
    thresholds=(
        Threshold(
            "growth-window",
            100,
            "the last this many steps are tested for a steady rise of the gradient norm...",
        ),
        Threshold(
            "growth-factor",
            10.0,
            "...by at least this factor (median of the window's last quarter over its first)",
            above_zero=True,
        ),
    ),
    objectives=(
        "any: the gradient norm's trend, whatever the loss's kind; information where the loss "
        "kept falling, its fall slowing, and the optimizer's steps did not grow (a minimum "
        "that sharpens: a likelihood whose learned noise shrinks)"
    ),
)
def exploding_trend(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Over the last growth-window steps (20 at least), the median gradient norm of the last
    quarter is growth-factor times the first quarter's, and the norm rises steadily (rank
    correlation with the step of 0.8 or more). Where another optimizer took its first step
    within the window, each side of that step is judged alone (_objectives)."""
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live() if finite(r.grad_norm) and r.grad_norm > 0]
        tail = _rising_part(run, s.index, steps[-int(t.growth_window) :], t)
        if len(tail) < 20:
            continue
        q = max(len(tail) // 4, 1)
        early, late, rho = _growth(tail)
        clip = clip_note(tail)
        advice = (
            "lower the learning rate, clip the gradient norm, or add normalization; "
            "this trend ends in NaN"
        )
        if clip == "scaled":
            advice = (
                "clipping runs on scaled gradients (see clip-before-unscale): fix that first, "
                "then lower the learning rate or add normalization if the norm still grows"
            )
        elif clip:
            advice = (
                f"clipping (max_norm {clip}) is on and bounds the step, not the growth: lower "
                "the learning rate or add normalization; this trend ends in NaN"
            )
        finding = this.finding(
            s.subject("total-grad-norm"),
            s.say(
                f"the gradient norm grew {late / early:.3g}× over steps {tail[0].step}-"
                f"{tail[-1].step}, steadily (rank correlation with the step {rho:.2f})"
            ),
            advice,
            value=late / early,
            threshold=t.growth_factor,
            evidence=(
                f"median norm {num(early)} at steps {tail[0].step}-{tail[q - 1].step}, "
                f"{num(late)} at steps {tail[-q].step}-{tail[-1].step}",
            ),
        )
        descent = None if clip else sharpening.steady_descent(s, tail, q, _spearman)
        out.append(sharpening.as_information(finding, descent) if descent else finding)
    return out


def _growth(tail: Sequence[StepRecord]) -> tuple[float, float, float]:
    """The median norm of the first and last quarter, and the norm's rank correlation with
    the step."""
    q = max(len(tail) // 4, 1)
    early = statistics.median(r.grad_norm for r in tail[:q])
    late = statistics.median(r.grad_norm for r in tail[-q:])
    return early, late, _spearman([r.step for r in tail], [r.grad_norm for r in tail])


def _rises(tail: Sequence[StepRecord], t: Thresholds) -> bool:
    if len(tail) < 20:
        return False
    early, late, rho = _growth(tail)
    return early > 0 and late / early >= t.growth_factor and rho >= 0.8


def _rising_part(
    run: WatchRun, index: int, tail: list[StepRecord], t: Thresholds
) -> list[StepRecord]:
    """The part of the window that rises steadily: the whole, or one side of another
    optimizer's first step, or none; the whole across that step only where it rose
    growth-factor times without the jump at that step (a growth the join did not make)."""
    parts = _objectives(run, index, tail)
    rising = next((part for part in parts if _rises(part, t)), [])
    if rising or len(parts) < 2 or not _rises(tail, t):
        return rising
    before, after = parts
    if not before or not after:
        return []
    early, late, _ = _growth(tail)
    jump = _level(after[:JOIN_LEVEL]) / _level(before[-JOIN_LEVEL:])
    return tail if late / early / max(jump, 1.0) >= t.growth_factor else []


JOIN_LEVEL = 5
"""Steps on each side of another optimizer's first step whose median norms give the jump."""


def _level(steps: Sequence[StepRecord]) -> float:
    return statistics.median(r.grad_norm for r in steps)


def _objectives(run: WatchRun, index: int, tail: list[StepRecord]) -> list[list[StepRecord]]:
    """The window cut where another optimizer took its first step: an opponent that joins
    mid-run (a GAN's discriminator after the generator's warm-up on reconstruction alone,
    Parallel WaveGAN's discriminator_train_start_steps) adds its terms to this optimizer's
    gradient from then on, so the norm's jump there is a new objective's level, not a
    trend; a norm that grows steadily still does on one side of it."""
    if not tail:
        return [tail]
    firsts = (run.store.of_optimizer(k) for k in run.store.optimizers() if k != index)
    joined = max(
        (f[0].step for f in firsts if f and tail[0].step < f[0].step <= tail[-1].step),
        default=None,
    )
    if joined is None:
        return [tail]
    return [[r for r in tail if r.step < joined], [r for r in tail if r.step >= joined]]


STARTED = 3
"""The first steps whose median is where the loss started."""


def _loss_fell(steps: Sequence[StepRecord], k: int, q: int) -> bool:
    """The loss fell 10× or more (to 0 included) from the first k steps (those the norms
    start from) to the last q: convergence, not vanishing. A run that fits its data within
    its first quarter has its early median there already. The fall is measured from where
    the loss started (its first STARTED steps) where that is lower: a blow-up within the
    first k steps (an lr that saturates the units at once) lifts their median, and the
    loss's return from it is no fall. A margin or hinge loss met (exactly 0 at most of the
    last steps) has no gradient by right, however early it got there."""
    early = [r.loss for r in steps[:k] if r.loss is not None and math.isfinite(r.loss)]
    late = [r.loss for r in steps[-q:] if r.loss is not None and math.isfinite(r.loss)]
    if not early or not late:
        return False
    first = min(statistics.median(early), statistics.median(early[:STARTED]))
    last = statistics.median(late)
    return last == 0 or (first > 0 and 0 <= last < 0.1 * first)


FLOAT32_EPS = 2.0**-23
"""The relative resolution of a float32 loss: steps that change it less change nothing."""


def _stationary(steps: Sequence[StepRecord], q: int) -> bool:
    """The loss fell, or never moved, and did not move over the last q steps beyond its float32
    resolution: the steps no longer change a deterministic objective, the optimizer sits at
    its minimum (a small inner solve run to convergence at each outer step: CAGrad's task
    weights, an attack's perturbation), and its gradient shrinks there by right. Batches of
    data move a loss far more than that, however dead the network; a full batch's loss
    stands as still once the gradients died, but higher than it began (units saturated by
    a step too large) or where it moved before (a loss that moved is no still objective)."""
    late = steps[-q:]
    losses = [r.loss for r in late if r.loss is not None and math.isfinite(r.loss)]
    early = [r.loss for r in steps[:q] if r.loss is not None and math.isfinite(r.loss)]
    if len(losses) < len(late) or len(losses) < 2 or not early:
        return False
    return _still(losses) and (max(losses) < max(early) or _still(early))


def _still(losses: list[float]) -> bool:
    level = max(abs(x) for x in losses)
    return level > 0 and max(losses) - min(losses) <= 4 * FLOAT32_EPS * level


@rule(
    "GS405",
    "vanishing-over-time",
    Severity.WARNING,
    "vanishing",
    Stage.WATCH,
    "watch: a layer's gradient norm fell by orders of magnitude while the loss did not",
    example="ReLU units that die one after another under a high learning rate",
    fix="lower the learning rate, use LeakyReLU or GELU, normalisation or residual connections",
    thresholds=(
        Threshold(
            "vanish-time-factor",
            1e-3,
            "a layer's gradient norm late in the run over early in it, below this, while the loss"
            " did not fall as much",
        ),
    ),
    objectives=(
        "any: each layer's gradient norm; the loss, whatever its kind, only excuses it "
        "when it fell tenfold, sits at exactly 0 (a converged run's gradients shrink by "
        "right; a met margin has none) or stopped moving at its float32 resolution (a "
        "deterministic inner solve at its minimum)"
    ),
)
def vanishing_over_time(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A layer's median gradient norm over the last quarter of the run is below
    vanish-time-factor times its median over the first steps, while the loss did not fall
    tenfold (a converged run's gradients shrink by right) and still moves (a deterministic
    objective at its minimum stops moving, or moves by less and less with its gradient: a
    MAP fit whose negative log joint has no floor at 0: loss_at_rest.py). Not a scipy
    minimiser's evaluations: it stops on its gradient's tolerance by design, with no lr to
    lower, and one series may hold several of its fits one after another (botorch's
    ModelListGP), the first's gradient kept. Information where the norm fell to exactly 0 on
    a module below a floor on a loss term (free bits: rules/floor_stop.py)."""
    out = []
    for s in by_optimizer(run):
        out.extend(vanishing(run, s, t))
    return out


def vanishing(run: WatchRun, s: Series, t: Thresholds) -> list[Finding]:
    steps = s.live()
    if len(steps) < 20:
        return []
    q = max(len(steps) // 4, 1)
    k = max(5, q // 5)
    if _loss_fell(steps, k, q) or _stationary(steps, q) or s.evaluations:
        return []
    if _no_floor(run, s) and _not_stalled(steps, k, q, t):
        return []
    names = run.names()
    # a module whose parameters are all frozen now got no gradient because of it (GS417)
    groups = {
        module_of(names[i]) for i in s.members if i < len(names) and run.params[i].requires_grad
    }
    early = [group_norms(run, r, s.members) for r in steps[:k]]
    late = [group_norms(run, r, s.members) for r in steps[-q:]]
    out = []
    for g in sorted(groups):
        a = [h[g] for h in early if g in h]
        b = [h[g] for h in late if g in h]
        if not a or not b:
            continue
        first, last = statistics.median(a), statistics.median(b)
        if first > 0 and last / first < t.vanish_time_factor:
            at = (steps[0], steps[k - 1], steps[-q], steps[-1])
            finding = _vanished(s, g, first, last, at, t)
            held = [run.params[i] for i in s.members if i < len(names) and module_of(names[i]) == g]
            out.append(floor_stop.vanished(held, last, finding))
    return out


def _not_stalled(steps: Sequence[StepRecord], k: int, q: int, t: Thresholds) -> bool:
    """A loss with no floor that came to rest with its gradient, or that a term still
    lowers at every step (loss_at_rest.py): no stall for a vanishing gradient to cause."""
    resting = loss_at_rest.came_to_rest(steps, k, q, t.vanish_time_factor)
    return resting or loss_at_rest.still_descending(steps, q)


def _vanished(
    s: Series, g: str, first: float, last: float, at: tuple[StepRecord, ...], t: Thresholds
) -> Finding:
    """GS405's finding on module `g`: its early median norm `first`, its late one `last`."""
    return RULES["GS405"].finding(
        g,
        s.say(
            (
                f"the gradient norm of {g} fell to 0 (from {num(first)})"
                if last == 0
                else f"the gradient norm of {g} fell {first / last:.3g}× "
                f"(from {num(first)} to {num(last)})"
            )
            + " while the loss did not"
        ),
        "dead ReLUs or saturation: lower the learning rate, use LeakyReLU/GELU, "
        "normalization or residual connections",
        value=last / first,
        threshold=t.vanish_time_factor,
        evidence=(
            f"median at steps {at[0].step}-{at[1].step}: {num(first)}; "
            f"at steps {at[2].step}-{at[3].step}: {num(last)}",
        ),
    )


def _no_floor(run: WatchRun, s: Series) -> bool:
    """The loss has no known lower bound (a negative log joint, a custom objective): its
    level says nothing of a minimum, so a loss come to rest may be one. A cross-entropy or
    an MSE that stops moving above its floor is a plateau, and stays judged: a full-batch
    run whose units die moves its loss by less and less too."""
    kind = run.loss_kind(s.index)
    return kind is None or kind.lower_bound() is None
