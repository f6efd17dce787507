"""Verdicts over time (GS4xx): pure functions of a recorded `WatchRun`, no torch.

Each rule reads the per-step series and returns findings whose evidence names
steps, values and parameters. Thresholds come from config.Thresholds. With several
optimizers (a GAN's D and G) each optimizer's steps are judged as their own series and
the finding names the optimizer. This module holds the series rules (non-finite, spikes,
trends, whether the run got better, parameters that stop learning); step_setup.py the
rules about how the run is set up (clipping, AMP, update ratios, optimizer membership,
resets).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules import step_batch, step_setup
from gradscope.rules.step_common import (
    Series,
    about,
    by_optimizer,
    finite,
    inspect_command,
    module_of,
    optimizer_name,
    robust_sigma,
    several,
    spikes,
    step_list,
)
from gradscope.steps.records import StepRecord, WatchRun

__all__ = ["CHECKS", "diagnose", "spike_steps", "spikes"]


# -- GS401 -----------------------------------------------------------------------------
def _bad_params(run: WatchRun, r: StepRecord) -> list[str]:
    if r.skipped:
        return []
    return [
        n
        for n, v in zip(run.names(), r.param_norms, strict=False)
        if v is not None and not math.isfinite(v)
    ]


def _non_finite(r: StepRecord) -> bool:
    return (r.loss is not None and not math.isfinite(r.loss)) or (
        not r.skipped and not math.isfinite(r.grad_norm)
    )


def non_finite(run: WatchRun, t: Thresholds) -> list[Finding]:
    """The first step with a non-finite loss, or with gradient elements that are NaN/Inf
    (norms are accumulated in float64, so an infinite norm means infinite elements)."""
    for r in run.steps:
        bad_loss = r.loss is not None and not math.isfinite(r.loss)
        bad = _bad_params(run, r)
        if not bad_loss and not bad and (r.skipped or math.isfinite(r.grad_norm)):
            continue
        count = sum(1 for x in run.steps if _non_finite(x))
        prev = next((p for p in reversed(run.steps) if p.step < r.step), None)
        evidence = [f"step {r.step}: loss {num(r.loss)}, total gradient norm {num(r.grad_norm)}"]
        if bad:
            evidence.append(
                f"first parameters with non-finite gradient elements: {', '.join(bad[:6])}"
                + (f" (+{len(bad) - 6} more)" if len(bad) > 6 else "")
            )
        if prev is not None:
            evidence.append(
                f"step {prev.step} before it: loss {num(prev.loss)}, norm {num(prev.grad_norm)}"
            )
        evidence.append(f"{count} of {len(run.steps)} recorded steps were non-finite")
        if bad_loss:
            what = "the loss became non-finite" + (
                " (and with it the gradients)" if bad or not math.isfinite(r.grad_norm) else ""
            )
        else:
            what = "the gradients became non-finite (NaN/Inf elements) while the loss was " + num(
                r.loss
            )
        who = f" ({optimizer_name(run, r.optimizer)})" if several(run) else ""
        finding = RULES["GS401"].finding(
            bad[0] if bad else "loss",
            f"{what} at step {r.step}{who} (first of {count} such steps)",
            f"run `{inspect_command(run, r.step)}` (ARGS: the script's own arguments) "
            "to stop at that step's backward and name the op that made the first "
            f"NaN/Inf; check the batch of step {r.step} and the learning rate",
            value=float(r.step),
            evidence=tuple(evidence),
        )
        return [about(finding, [r.step, *(x.step for x in run.steps if _non_finite(x))])]
    return []


# -- GS402 / GS403 ---------------------------------------------------------------------
def _series_spikes(
    s: Series, t: Thresholds, kind: str
) -> tuple[list[StepRecord], list[tuple[int, float, float]]]:
    """The series' steps with a finite value and the spikes among them; the first steps'
    spikes are left out where GS414 explains them as an early blow-up."""
    if kind == "loss":
        steps = [r for r in s.live() if finite(r.loss)]
        values = [r.loss for r in steps if r.loss is not None]
    else:
        steps = [r for r in s.live() if finite(r.grad_norm)]
        values = [r.grad_norm for r in steps]
    found = spikes(values, t)
    if found and found[0][0] < t.spike_min_history and early_blowup_of(s, t) is not None:
        found = [f for f in found if f[0] >= t.spike_min_history]
    return steps, found


def spike_steps(run: WatchRun, t: Thresholds, kind: str) -> list[int]:
    """The steps GS402 ("loss") or GS403 ("norm") calls spikes, every optimizer's: what
    the views mark."""
    out: list[int] = []
    for s in by_optimizer(run):
        steps, found = _series_spikes(s, t, kind)
        out.extend(steps[i].step for i, _, _ in found)
    return sorted(out)


def loss_spike(run: WatchRun, t: Thresholds) -> list[Finding]:
    out = []
    for s in by_optimizer(run):
        steps, found = _series_spikes(s, t, "loss")
        if not found:
            continue
        where = [steps[i].step for i, _, _ in found]
        i, value, med = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])
        early = " (against the steps before it: the first steps)" if i < t.spike_min_history else ""
        out.append(
            about(
                RULES["GS402"].finding(
                    s.subject("loss"),
                    s.say(
                        f"the loss spiked at {len(found)} step(s): step {steps[i].step} reached "
                        f"{num(value)} against a rolling median of {num(med)}{early}"
                    ),
                    "look at the batches of those steps; if the gradient norm spiked too, lower "
                    "the learning rate"
                    + {
                        "": " or clip",
                        "scaled": " (and fix the clipping: see clip-before-unscale)",
                    }.get(_clip_note(s.steps), " (clipping is already on)"),
                    value=value,
                    threshold=med,
                    evidence=(f"spike steps: {step_list(where)}",),
                ),
                where,
            )
        )
    return out


def _spike_advice(s: Series, at: StepRecord) -> str:
    clip = _clip_note(s.steps)
    if clip == "scaled":
        return (
            "clipping ran on scaled gradients and so did not bound them (see "
            "clip-before-unscale); once it is fixed, lower the learning rate or lengthen "
            f"warm-up if the spikes remain; look at the batch of step {at.step}"
        )
    if clip:
        return (
            f"the script already clips (max_norm {clip}), which caps the step but not its "
            "cause: lower the learning rate or lengthen warm-up, and look at the batch of "
            f"step {at.step}"
        )
    return (
        "clip the gradient norm (torch.nn.utils.clip_grad_norm_), lower the learning rate "
        f"or lengthen warm-up; look at the batch of step {at.step}"
    )


def norm_spike(run: WatchRun, t: Thresholds) -> list[Finding]:
    out = []
    for s in by_optimizer(run):
        steps, found = _series_spikes(s, t, "norm")
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
        out.append(
            about(
                RULES["GS403"].finding(
                    s.subject("total-grad-norm"),
                    s.say(
                        f"the gradient norm spiked at {len(found)} step(s): step {at.step} reached "
                        f"{num(value)} against a rolling median of {num(med)}"
                        + (
                            " (the steps before it: the first steps)"
                            if i < t.spike_min_history
                            else ""
                        )
                    ),
                    _spike_advice(s, at),
                    value=value,
                    threshold=med,
                    evidence=tuple(evidence),
                ),
                where,
            )
        )
    return out


def _group_norms(run: WatchRun, r: StepRecord, members: Sequence[int]) -> dict[str, float]:
    sq: dict[str, float] = {}
    names = run.names()
    for i in members:
        v = r.param_norms[i] if i < len(r.param_norms) else None
        if v is not None and math.isfinite(v) and i < len(names):
            g = module_of(names[i])
            sq[g] = sq.get(g, 0.0) + v * v
    return {k: math.sqrt(v) for k, v in sq.items()}


def _drivers(run: WatchRun, s: Series, at: StepRecord, window: list[StepRecord]) -> str:
    now = _group_norms(run, at, s.members)
    history = [_group_norms(run, r, s.members) for r in window]
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
        f"the update norm did not spike before the gradient norm (sampled every "
        f"{run.update_every} steps)"
    )


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


def exploding_trend(run: WatchRun, t: Thresholds) -> list[Finding]:
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live() if finite(r.grad_norm) and r.grad_norm > 0]
        tail = steps[-int(t.growth_window) :]
        if len(tail) < 20:
            continue
        q = max(len(tail) // 4, 1)
        early = statistics.median(r.grad_norm for r in tail[:q])
        late = statistics.median(r.grad_norm for r in tail[-q:])
        rho = _spearman([r.step for r in tail], [r.grad_norm for r in tail])
        if early <= 0 or late / early < t.growth_factor or rho < 0.8:
            continue
        clip = _clip_note(tail)
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
        out.append(
            RULES["GS404"].finding(
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
        )
    return out


def _loss_fell(steps: Sequence[StepRecord], q: int) -> bool:
    """The loss fell 10× or more (to 0 included): convergence, not vanishing."""
    early = [r.loss for r in steps[:q] if r.loss is not None and math.isfinite(r.loss)]
    late = [r.loss for r in steps[-q:] if r.loss is not None and math.isfinite(r.loss)]
    if not early or not late:
        return False
    first, last = statistics.median(early), statistics.median(late)
    return first > 0 and 0 <= last < 0.1 * first


def vanishing_over_time(run: WatchRun, t: Thresholds) -> list[Finding]:
    out = []
    for s in by_optimizer(run):
        out.extend(_vanishing(run, s, t))
    return out


def _vanishing(run: WatchRun, s: Series, t: Thresholds) -> list[Finding]:
    steps = s.live()
    if len(steps) < 20:
        return []
    q = max(len(steps) // 4, 1)
    if _loss_fell(steps, q):
        return []
    names = run.names()
    # a module whose parameters are all frozen now got no gradient because of it (GS417)
    groups = {
        module_of(names[i]) for i in s.members if i < len(names) and run.params[i].requires_grad
    }
    k = max(5, q // 5)
    early = [_group_norms(run, r, s.members) for r in steps[:k]]
    late = [_group_norms(run, r, s.members) for r in steps[-q:]]
    out = []
    for g in sorted(groups):
        a = [h[g] for h in early if g in h]
        b = [h[g] for h in late if g in h]
        if not a or not b:
            continue
        first, last = statistics.median(a), statistics.median(b)
        if first > 0 and last / first < t.vanish_time_factor:
            out.append(
                RULES["GS405"].finding(
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
                        f"median at steps {steps[0].step}-{steps[k - 1].step}: {num(first)}; "
                        f"at steps {steps[-q].step}-{steps[-1].step}: {num(last)}",
                    ),
                )
            )
    return out


# -- GS414 / GS415 ---------------------------------------------------------------------
@dataclass(frozen=True)
class Blowup:
    """An optimizer's loss that rose far above its first steps' level early on."""

    steps: list[StepRecord]
    """The series' live steps with a finite loss."""
    base: float
    """Median loss of the first 3 steps."""
    at: int
    """Index in `steps` of the top of the rise (of the 3-step median)."""
    peak: float
    """The 3-step median loss there."""
    norm_base: float
    norm_at: StepRecord
    """The step of the largest gradient norm of the rise."""
    end: float | None
    """Median loss of the last steps, when there are enough after the top; else None."""
    end_from: int
    recovered: bool | None
    strong: bool
    """The loss rose blowup-loss-ratio× with the norm; else a milder rise that stuck."""


def _window(n: int) -> int:
    """Steps in a first or last window: a fifth of the run, 5 to 50."""
    return max(5, min(50, n // 5))


def _blowup(s: Series, t: Thresholds) -> Blowup | None:
    steps = [r for r in s.live() if finite(r.loss)]
    losses = [r.loss for r in steps if r.loss is not None]
    if len(losses) < 6:
        return None
    base = min(losses[0], statistics.median(losses[:3]))  # step 1's loss is before any update
    if base <= 0 or t.blowup_loss_ratio <= 1:
        return None
    logged = all(v > 0 for v in losses)
    noise = robust_sigma([math.log(v) for v in losses] if logged else losses)
    limit = min(len(losses) - 1, int(t.blowup_window))
    med3 = {i: statistics.median(losses[i - 1 : i + 2]) for i in range(4, limit)}

    def rise(m: float) -> float:  # in robust sigmas of the step-to-step noise
        return (math.log(m / base) if logged else m - base) / noise if noise > 0 else math.inf

    # beyond 3 sigmas with the norm's confirmation, 5 without it: the highest 3-step
    # median of 100 noisy steps over a low first step reaches 3 sigmas by chance
    risen = [
        i for i, m in med3.items() if m >= min(t.blowup_loss_ratio, t.blowup_rise_ratio) * base
    ]
    risen = [i for i in risen if rise(med3[i]) > 3]
    if not risen:
        return None
    at = max(risen, key=lambda i: med3[i])
    # the norm during the rise, after the first 3 steps (a fresh model's larger first
    # norms are its transient, not the blow-up)
    norms = [r for r in steps[3 : at + 2] if not math.isnan(r.grad_norm)]
    finite_norms = [r.grad_norm for r in s.live() if finite(r.grad_norm)]
    first = [r.grad_norm for r in s.live()[:3] if finite(r.grad_norm)]
    if not norms or not first:
        return None
    norm_base = min(statistics.median(first), statistics.median(finite_norms))
    norm_at = max(norms, key=lambda r: r.grad_norm)
    w = _window(len(losses))
    end, recovered = None, None
    if len(losses) - at - 1 >= w:
        end = statistics.median(losses[-w:])
        recovered = end <= base * (1 - t.blowup_recover_fall)
    strong = (
        med3[at] >= t.blowup_loss_ratio * base
        and norm_base > 0
        and norm_at.grad_norm >= t.blowup_norm_ratio * norm_base
    )
    if not strong and (recovered is not False or rise(med3[at]) <= 5):
        return None  # a milder rise counts only if it stuck and is far beyond the noise
    return Blowup(
        steps, base, at, med3[at], norm_base, norm_at, end, len(losses) - w, recovered, strong
    )


def early_blowup_of(s: Series, t: Thresholds) -> Blowup | None:
    """GS414's verdict on one series: none for a series named as one of several."""
    return None if s.name else _blowup(s, t)


def _clip_note(steps: Sequence[StepRecord]) -> str:
    """What the advice must know: whether the script already clips, and how."""
    clipped = [r for r in steps if r.max_norm is not None]
    if not clipped:
        return ""
    if any(r.scaled_clip for r in clipped):
        return "scaled"
    return num(statistics.median(r.max_norm for r in clipped if r.max_norm is not None))


def _lr(r: StepRecord) -> str:
    return "/".join(num(v) for v in r.lrs) if r.lrs else "none"


def early_blowup(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Judged only with one optimizer, as GS415: a GAN's G loss rises early by design
    (its D learns), with its norm."""
    if several(run):
        return []
    out = []
    for s in by_optimizer(run):
        b = _blowup(s, t)
        if b is None:
            continue
        top = b.steps[b.at]
        start = b.steps[0].step
        message = (
            (
                "the loss blew up in the first steps: "
                if b.strong
                else "in the first steps the loss rose above where it started: "
            )
            + f"{num(b.peak)} around step {top.step} "
            f"(median of 3 steps), {b.peak / b.base:.3g}× the {num(b.base)} it started at, "
            f"with the gradient norm at {num(b.norm_at.grad_norm)} at step "
            f"{b.norm_at.step} ({b.norm_at.grad_norm / b.norm_base:.3g}× its usual "
            f"{num(b.norm_base)})"
        )
        if b.recovered is False and b.end is not None:
            where = f"{(b.base - b.end) / b.base:.0%} below" if b.end < b.base else "not below"
            message += (
                f"; it never recovered: the median loss of its last steps "
                f"({b.steps[b.end_from].step}-{b.steps[-1].step}) is {num(b.end)}, {where} "
                "where it started"
            )
        elif b.recovered:
            message += (
                f"; the loss came back to {num(b.end)} by the end, but updates that large "
                "so early often leave the model on a worse plateau than a gentler start"
            )
        else:
            message += "; the run ended before it could be seen to recover"
        clip = _clip_note(b.steps[: b.at + 2])
        advice = (
            f"lower the learning rate (it was {_lr(top)} at step {top.step}) or lengthen "
            "the warm-up, so the first updates of a fresh model stay small"
        )
        if clip and clip != "scaled":
            advice += f"; clipping at max_norm {clip} was on and did not prevent it"
        shown = b.steps[: min(len(b.steps), max(b.at + 3, 8), 14)]
        evidence = (
            f"loss at steps {shown[0].step}-{shown[-1].step}: "
            + ", ".join(num(r.loss) for r in shown),
            "gradient norm at those steps: " + ", ".join(num(r.grad_norm) for r in shown),
            f"learning rate at step {start}: {_lr(b.steps[0])}, at step {top.step}: {_lr(top)}",
        )
        finding = RULES["GS414"].finding(
            s.subject("loss"),
            s.say(message),
            advice,
            value=b.peak / b.base,
            threshold=t.blowup_loss_ratio,
            evidence=evidence,
        )
        if b.recovered is False:
            finding = replace(finding, severity=Severity.ERROR)
        out.append(about(finding, (top.step, b.norm_at.step)))
    return out


def no_progress(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Judged only with one optimizer: the losses of several (a GAN's D and G) are
    adversarial, and one that does not fall is their normal state."""
    if several(run):
        return []
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live() if finite(r.loss)]
        losses = [r.loss for r in steps if r.loss is not None]
        if len(losses) < max(t.progress_min_steps, 10) or early_blowup_of(s, t) is not None:
            continue
        w = _window(len(losses))
        # where it started: the higher of the first 5 and the first window's medians, so a
        # loss that falls within the first window is not taken to start low
        first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
        last = statistics.median(losses[-w:])
        if first == 0:
            continue
        change = (last - first) / abs(first)
        if -change >= t.progress_min_fall:
            out.extend(_stalled(s, steps, losses, first, last, t))
            continue
        evidence = [
            f"median loss {num(first)} at the start (steps {steps[0].step}-{steps[4].step} "
            f"or {steps[0].step}-{steps[w - 1].step}, the higher), {num(last)} at steps "
            f"{steps[-w].step}-{steps[-1].step} ({change:+.1%})",
            f"learning rate {_lr(steps[0])} at step {steps[0].step}, {_lr(steps[-1])} at "
            f"step {steps[-1].step}",
            f"gradient norm {num(steps[0].grad_norm)} at step {steps[0].step}, "
            f"{num(steps[-1].grad_norm)} at step {steps[-1].step}",
        ]
        clip = _clip_note(steps)
        advice = (
            "clipping before unscale_ cuts every update to almost nothing (see "
            "clip-before-unscale); "
            if clip == "scaled"
            else ""
        ) + (
            "the model did not learn: a learning rate too high sits at chance level (lower "
            "it or lengthen warm-up), one too small never moves the loss (update/weight "
            "ratios far below 1e-3 say so); check that step() updates the model the loss "
            "is computed on and that the targets match the inputs (a loss not meant to "
            "fall, as an RL objective or a converged checkpoint's, is fine: ignore it)"
        )
        if clip and clip != "scaled":
            evidence.append(f"the script clips at max_norm {clip}")
            advice += "; clipping is already on, so it is not what is missing"
        out.append(
            RULES["GS415"].finding(
                s.subject("loss"),
                s.say(
                    f"the loss ended no better than where it started: median {num(last)} over "
                    f"the last {w} steps against {num(first)} over its first steps"
                ),
                advice,
                value=change,
                threshold=-t.progress_min_fall,
                evidence=tuple(evidence),
            )
        )
    return out


def _stalled(
    s: Series,
    steps: list[StepRecord],
    losses: list[float],
    first: float,
    last: float,
    t: Thresholds,
) -> list[Finding]:
    """Info: the loss fell a little, then stopped for the second half of the run (a high
    learning rate held back by clipping stalls this way near its start). Only info: a
    fine-tuning run or a hard task also falls little and flattens."""
    fall = (first - last) / abs(first)
    w = _window(len(losses))
    mid = len(losses) // 2
    middle = statistics.median(losses[max(0, mid - w // 2) : mid + (w + 1) // 2])
    if fall >= t.progress_stall_fall or (middle - last) / abs(first) >= t.progress_min_fall:
        return []
    # "has not improved" only where the noise lets two window medians show a fall of
    # progress-min-fall (standard error of a median: 1.25 sigma / sqrt(w))
    logged = all(v > 0 for v in losses)
    sigma = (
        robust_sigma([math.log(v) for v in losses]) if logged else robust_sigma(losses) / abs(first)
    )
    if 1.25 * sigma * math.sqrt(2 / w) > t.progress_min_fall / 2:
        return []
    finding = RULES["GS415"].finding(
        s.subject("loss"),
        s.say(
            f"the loss fell only {fall:.0%} (median {num(first)} over its first steps, "
            f"{num(last)} over the last {w}) and has not improved since about step "
            f"{steps[mid].step} ({num(middle)} there)"
        ),
        "if this is a fresh model, it stalled near where it started: try a lower learning "
        "rate or a longer warm-up; fine if it is a fine-tuning run that starts near its best",
        value=-fall,
        threshold=-t.progress_stall_fall,
    )
    return [replace(finding, severity=Severity.INFO)]


# -- GS417 -----------------------------------------------------------------------------
def stopped_learning(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A parameter that had gradients and then none, to the end: frozen midway
    (`requires_grad_(False)`: None, or zeros under zero_grad(set_to_none=False)), or cut
    from the loss. Judged on its own optimizer's steps (a GAN's G gets nothing in D's).
    Never-learned is GS413's; a dead layer whose gradient went to exactly 0 is GS405's.
    Read from the run's per-tensor running facts (`run.tensors`), so every step counts
    however few of them the report kept in detail."""
    out = []
    for s in by_optimizer(run):
        live_steps = run.tensors.live_steps(s.index)
        dead = {f.subject for f in _vanishing(run, s, t)}
        for i in s.members:
            if i >= len(run.params) or not run.params[i].in_optimizer:
                continue
            p = run.params[i]
            had = run.tensors.learned(s.index, i)
            if had is None:
                continue
            tail = live_steps - had.last - 1
            if tail < max(t.stop_min_steps, 1) or tail < 4 * had.longest_gap:
                continue
            none = had.zero_after == 0
            if not none and p.requires_grad and module_of(p.name) in dead:
                continue
            since = had.since_step
            what = (
                "no gradient (None)"
                if none
                else "only zero gradients"
                if had.none_after == 0
                else "no gradient (None, or zeros)"
            )
            if not p.requires_grad:
                advice = (
                    f"it is frozen now (requires_grad=False): if that was not meant, find the "
                    f"requires_grad_(False) or freeze call the script makes around step {since}; "
                    "if it was, take it out of the optimizer (or ignore this finding)"
                )
            else:
                advice = (
                    f"find what changed at step {since}: a detach() or no_grad() around it, or "
                    f"a branch the loss stopped using (`{inspect_command(run, since)}` shows "
                    "where the graph is cut)"
                )
            out.append(
                about(
                    RULES["GS417"].finding(
                        p.name,
                        s.say(
                            f"{p.name} stopped learning at step {since}: it had gradients until "
                            f"step {had.last_step}, then {what} in all {tail} steps to the end"
                        ),
                        advice,
                        value=float(since),
                        threshold=t.stop_min_steps,
                        evidence=(
                            f"{had.had} of the first {had.last + 1} steps had a gradient; the "
                            f"longest gap while learning was {had.longest_gap} steps",
                            f"gradient norm at step {had.last_step}: {num(had.last_value)}",
                        ),
                    ),
                    [since],
                )
            )
    return out


CHECKS: list[Callable[[WatchRun, Thresholds], list[Finding]]] = [
    non_finite,
    loss_spike,
    norm_spike,
    exploding_trend,
    vanishing_over_time,
    early_blowup,
    no_progress,
    stopped_learning,
    *step_setup.CHECKS,
    *step_batch.CHECKS,
]


def diagnose(run: WatchRun, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for rule in CHECKS:
        out.extend(rule(run, t))
    stopped = {f.subject for f in out if f.rule == "GS417"}
    # a parameter frozen midway is GS417's: its low update ratio is the consequence
    return [f for f in out if not (f.rule == "GS410" and f.subject in stopped)]
