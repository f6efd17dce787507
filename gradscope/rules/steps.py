"""Verdicts over time (GS4xx): pure functions of a recorded `WatchRun`, no torch.

Each rule reads the per-step series and returns findings whose evidence names
steps, values and parameters. Thresholds come from config.Thresholds. This module
holds the series rules (non-finite, spikes, trends); step_setup.py the rules about
how the run is set up (clipping, AMP, update ratios, optimizer membership, resets).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding
from gradscope.rules import step_setup
from gradscope.rules.step_common import (
    finite,
    fmt,
    live,
    module_of,
    spikes,
    step_list,
)
from gradscope.watcher.records import StepRecord, WatchRun

__all__ = ["CHECKS", "diagnose", "spikes"]


def diagnose(run: WatchRun, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for rule in CHECKS:
        out.extend(rule(run, t))
    return out


# -- GS401 -----------------------------------------------------------------------------
def non_finite(run: WatchRun, t: Thresholds) -> list[Finding]:
    names = run.names()
    for r in run.steps:
        bad_loss = r.loss is not None and not math.isfinite(r.loss)
        bad = (
            []
            if r.skipped
            else [
                n
                for n, v in zip(names, r.param_norms, strict=False)
                if v is not None and not math.isfinite(v)
            ]
        )
        if not bad_loss and not bad:
            continue
        count = sum(
            1
            for x in run.steps
            if (x.loss is not None and not math.isfinite(x.loss))
            or (not x.skipped and not math.isfinite(x.grad_norm))
        )
        prev = next((p for p in reversed(run.steps) if p.step < r.step), None)
        evidence = [f"step {r.step}: loss {fmt(r.loss)}, total gradient norm {fmt(r.grad_norm)}"]
        if bad:
            evidence.append(
                f"first non-finite gradients: {', '.join(bad[:6])}"
                + (f" (+{len(bad) - 6} more)" if len(bad) > 6 else "")
            )
        if prev is not None:
            evidence.append(
                f"step {prev.step} before it: loss {fmt(prev.loss)}, norm {fmt(prev.grad_norm)}"
            )
        evidence.append(f"{count} of {len(run.steps)} recorded steps were non-finite")
        what = "loss" if bad_loss else "gradients"
        return [
            RULES["GS401"].finding(
                bad[0] if bad else "loss",
                f"the {what} became non-finite at step {r.step} (first of {count} such steps)",
                "run `gradscope inspect --script` on the same data, or torch.autograd."
                "set_detect_anomaly around that step, to find the op; check the batch at step "
                f"{r.step} and the learning rate",
                value=float(r.step),
                evidence=tuple(evidence),
            )
        ]
    return []


# -- GS402 / GS403 ---------------------------------------------------------------------
def loss_spike(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = [r for r in live(run) if finite(r.loss)]
    found = spikes([r.loss for r in steps if r.loss is not None], t)
    if not found:
        return []
    where = [steps[i].step for i, _, _ in found]
    i, value, med = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])
    return [
        RULES["GS402"].finding(
            "loss",
            f"the loss spiked at {len(found)} step(s): step {steps[i].step} reached "
            f"{fmt(value)} against a rolling median of {fmt(med)}",
            "look at the batches of those steps; if the gradient norm spiked too, lower the "
            "learning rate or clip",
            value=value,
            threshold=med,
            evidence=(f"spike steps: {step_list(where)}",),
        )
    ]


def norm_spike(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = [r for r in live(run) if finite(r.grad_norm)]
    found = spikes([r.grad_norm for r in steps], t)
    if not found:
        return []
    i, value, med = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])
    at = steps[i]
    window = steps[max(0, i - int(t.spike_window)) : i]
    evidence = [f"spike steps: {step_list([steps[j].step for j, _, _ in found])}"]
    drivers = _drivers(run, at, window)
    if drivers:
        evidence.append("layers that drove it (norm / own rolling median): " + drivers)
    evidence.append(_update_first(run, at, t))
    return [
        RULES["GS403"].finding(
            "total-grad-norm",
            f"the gradient norm spiked at {len(found)} step(s): step {at.step} reached "
            f"{fmt(value)} against a rolling median of {fmt(med)}",
            "clip the gradient norm (torch.nn.utils.clip_grad_norm_), lower the learning rate "
            "or lengthen warm-up; look at the batch of that step",
            value=value,
            threshold=med,
            evidence=tuple(evidence),
        )
    ]


def _group_norms(run: WatchRun, r: StepRecord) -> dict[str, float]:
    sq: dict[str, float] = {}
    for name, v in zip(run.names(), r.param_norms, strict=False):
        if v is not None and math.isfinite(v):
            sq[module_of(name)] = sq.get(module_of(name), 0.0) + v * v
    return {k: math.sqrt(v) for k, v in sq.items()}


def _drivers(run: WatchRun, at: StepRecord, window: list[StepRecord]) -> str:
    now = _group_norms(run, at)
    history = [_group_norms(run, r) for r in window]
    ranked = []
    for group, value in now.items():
        past = [h[group] for h in history if group in h]
        med = statistics.median(past) if past else 0.0
        if med > 0:
            ranked.append((value / med, group, value))
    ranked.sort(reverse=True)
    return ", ".join(f"{g} {fmt(v)} ({x:.1f}×)" for x, g, v in ranked[:3])


def _update_first(run: WatchRun, at: StepRecord, t: Thresholds) -> str:
    sampled = [r for r in run.steps if r.update_norm is not None and not r.skipped]
    before = [r for r in sampled if r.step <= at.step]
    for k, r in enumerate(before):
        base = [x.update_norm for x in before[max(0, k - 16) : k] if x.update_norm]
        if len(base) < 3 or r.step < at.step - t.spike_window:
            continue
        med = statistics.median(base)
        if r.update_norm is not None and med > 0 and r.update_norm > t.spike_min_ratio * med:
            if r.step < at.step:
                return (
                    f"the update norm spiked first: step {r.step}, {fmt(r.update_norm)} "
                    f"({r.update_norm / med:.1f}× its median), {at.step - r.step} steps "
                    "before the gradient: suspect the optimizer state, not one batch"
                )
            return f"the update norm spiked at the same step ({fmt(r.update_norm)})"
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
    steps = [r for r in live(run) if finite(r.grad_norm) and r.grad_norm > 0]
    tail = steps[-int(t.growth_window) :]
    if len(tail) < 20:
        return []
    q = max(len(tail) // 4, 1)
    early = statistics.median(r.grad_norm for r in tail[:q])
    late = statistics.median(r.grad_norm for r in tail[-q:])
    rho = _spearman([r.step for r in tail], [r.grad_norm for r in tail])
    if early <= 0 or late / early < t.growth_factor or rho < 0.8:
        return []
    return [
        RULES["GS404"].finding(
            "total-grad-norm",
            f"the gradient norm grew {late / early:.3g}× over steps {tail[0].step}-"
            f"{tail[-1].step}, steadily (rank correlation with the step {rho:.2f})",
            "lower the learning rate, clip the gradient norm, or add normalization; "
            "this trend ends in NaN",
            value=late / early,
            threshold=t.growth_factor,
            evidence=(
                f"median norm {fmt(early)} at steps {tail[0].step}-{tail[q - 1].step}, "
                f"{fmt(late)} at steps {tail[-q].step}-{tail[-1].step}",
            ),
        )
    ]


def vanishing_over_time(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = live(run)
    if len(steps) < 20:
        return []
    q = max(len(steps) // 4, 1)
    early_loss = [r.loss for r in steps[:q] if r.loss is not None and math.isfinite(r.loss)]
    late_loss = [r.loss for r in steps[-q:] if r.loss is not None and math.isfinite(r.loss)]
    if early_loss and late_loss and all(v > 0 for v in early_loss + late_loss):
        loss_fall = statistics.median(late_loss) / statistics.median(early_loss)
        if loss_fall < 0.1:  # the loss fell a lot too: convergence, not vanishing
            return []
    groups = {module_of(n) for n in run.names()}
    early = [_group_norms(run, r) for r in steps[: max(5, q // 5)]]
    late = [_group_norms(run, r) for r in steps[-q:]]
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
                    (
                        f"the gradient norm of {g} fell to 0 (from {fmt(first)})"
                        if last == 0
                        else f"the gradient norm of {g} fell {first / last:.3g}× "
                        f"(from {fmt(first)} to {fmt(last)})"
                    )
                    + " while the loss did not",
                    "dead ReLUs or saturation: lower the learning rate, use LeakyReLU/GELU, "
                    "normalization or residual connections",
                    value=last / first,
                    threshold=t.vanish_time_factor,
                    evidence=(
                        f"median at steps {steps[0].step}-{steps[max(5, q // 5) - 1].step}: "
                        f"{fmt(first)}; "
                        f"at steps {steps[-q].step}-{steps[-1].step}: {fmt(last)}",
                    ),
                )
            )
    return out


CHECKS: list[Callable[[WatchRun, Thresholds], list[Finding]]] = [
    non_finite,
    loss_spike,
    norm_spike,
    exploding_trend,
    vanishing_over_time,
    *step_setup.CHECKS,
]
