"""Verdicts over time (GS4xx): pure functions of a recorded `WatchRun`, no torch.

Each rule reads the per-step series and returns findings whose evidence names
steps, values and parameters. Thresholds come from config.Thresholds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding
from gradscope.watch.records import StepRecord, WatchRun

MAD_SIGMA = 1.4826
"""MAD × this estimates the standard deviation of normal data."""


def diagnose(run: WatchRun, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for rule in CHECKS:
        out.extend(rule(run, t))
    return out


# -- helpers ---------------------------------------------------------------------------
def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _fmt(v: float | None) -> str:
    if v is None:
        return "none"
    return f"{v:.3g}"


def _steps(steps: Sequence[int], cap: int = 6) -> str:
    shown = ", ".join(str(s) for s in steps[:cap])
    return shown + (f" … (+{len(steps) - cap})" if len(steps) > cap else "")


def _module(name: str) -> str:
    return name.rpartition(".")[0] or name


def _live(run: WatchRun) -> list[StepRecord]:
    """Steps that updated the weights (not skipped by GradScaler)."""
    return [r for r in run.steps if not r.skipped]


def _after_warmup(run: WatchRun, t: Thresholds) -> list[StepRecord]:
    return [r for r in run.steps if r.step > t.warmup_steps]


def spikes(values: Sequence[float], t: Thresholds) -> list[tuple[int, float, float]]:
    """(index, value, rolling median) of each value far above its trailing window."""
    logged = all(v > 0 for v in values)
    xs = [math.log(v) if logged else v for v in values]
    window, out = max(int(t.spike_window), 2), []
    for i in range(int(t.spike_min_history), len(xs)):
        base = xs[max(0, i - window) : i]
        med = statistics.median(base)
        sigma = MAD_SIGMA * statistics.median(abs(x - med) for x in base)
        jump = xs[i] - med
        ratio_ok = (
            jump > math.log(t.spike_min_ratio)
            if logged
            else jump > (t.spike_min_ratio - 1) * abs(med)
        )
        if jump > t.spike_sigma * sigma and ratio_ok:
            out.append((i, values[i], math.exp(med) if logged else med))
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
        evidence = [f"step {r.step}: loss {_fmt(r.loss)}, total gradient norm {_fmt(r.grad_norm)}"]
        if bad:
            evidence.append(
                f"first non-finite gradients: {', '.join(bad[:6])}"
                + (f" (+{len(bad) - 6} more)" if len(bad) > 6 else "")
            )
        if prev is not None:
            evidence.append(
                f"step {prev.step} before it: loss {_fmt(prev.loss)}, norm {_fmt(prev.grad_norm)}"
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
    steps = [r for r in _live(run) if _finite(r.loss)]
    found = spikes([r.loss for r in steps if r.loss is not None], t)
    if not found:
        return []
    where = [steps[i].step for i, _, _ in found]
    i, value, med = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])
    return [
        RULES["GS402"].finding(
            "loss",
            f"the loss spiked at {len(found)} step(s): step {steps[i].step} reached "
            f"{_fmt(value)} against a rolling median of {_fmt(med)}",
            "look at the batches of those steps; if the gradient norm spiked too, lower the "
            "learning rate or clip",
            value=value,
            threshold=med,
            evidence=(f"spike steps: {_steps(where)}",),
        )
    ]


def norm_spike(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = [r for r in _live(run) if _finite(r.grad_norm)]
    found = spikes([r.grad_norm for r in steps], t)
    if not found:
        return []
    i, value, med = max(found, key=lambda f: f[1] / f[2] if f[2] else f[1])
    at = steps[i]
    window = steps[max(0, i - int(t.spike_window)) : i]
    evidence = [f"spike steps: {_steps([steps[j].step for j, _, _ in found])}"]
    drivers = _drivers(run, at, window)
    if drivers:
        evidence.append("layers that drove it (norm / own rolling median): " + drivers)
    evidence.append(_update_first(run, at, t))
    return [
        RULES["GS403"].finding(
            "total-grad-norm",
            f"the gradient norm spiked at {len(found)} step(s): step {at.step} reached "
            f"{_fmt(value)} against a rolling median of {_fmt(med)}",
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
            sq[_module(name)] = sq.get(_module(name), 0.0) + v * v
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
    return ", ".join(f"{g} {_fmt(v)} ({x:.1f}×)" for x, g, v in ranked[:3])


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
                    f"the update norm spiked first: step {r.step}, {_fmt(r.update_norm)} "
                    f"({r.update_norm / med:.1f}× its median), {at.step - r.step} steps "
                    "before the gradient: suspect the optimizer state, not one batch"
                )
            return f"the update norm spiked at the same step ({_fmt(r.update_norm)})"
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
    steps = [r for r in _live(run) if _finite(r.grad_norm) and r.grad_norm > 0]
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
                f"median norm {_fmt(early)} at steps {tail[0].step}-{tail[q - 1].step}, "
                f"{_fmt(late)} at steps {tail[-q].step}-{tail[-1].step}",
            ),
        )
    ]


def vanishing_over_time(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = _live(run)
    if len(steps) < 20:
        return []
    q = max(len(steps) // 4, 1)
    early_loss = [r.loss for r in steps[:q] if r.loss is not None and math.isfinite(r.loss)]
    late_loss = [r.loss for r in steps[-q:] if r.loss is not None and math.isfinite(r.loss)]
    if early_loss and late_loss and all(v > 0 for v in early_loss + late_loss):
        loss_fall = statistics.median(late_loss) / statistics.median(early_loss)
        if loss_fall < 0.1:  # the loss fell a lot too: convergence, not vanishing
            return []
    groups = {_module(n) for n in run.names()}
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
                        f"the gradient norm of {g} fell to 0 (from {_fmt(first)})"
                        if last == 0
                        else f"the gradient norm of {g} fell {first / last:.3g}× "
                        f"(from {_fmt(first)} to {_fmt(last)})"
                    )
                    + " while the loss did not",
                    "dead ReLUs or saturation: lower the learning rate, use LeakyReLU/GELU, "
                    "normalization or residual connections",
                    value=last / first,
                    threshold=t.vanish_time_factor,
                    evidence=(
                        f"median at steps {steps[0].step}-{steps[max(5, q // 5) - 1].step}: "
                        f"{_fmt(first)}; "
                        f"at steps {steps[-q].step}-{steps[-1].step}: {_fmt(last)}",
                    ),
                )
            )
    return out


# -- GS406 -----------------------------------------------------------------------------
def clipping_binds(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = [r for r in _after_warmup(run, t) if r.max_norm is not None and not r.skipped]
    if len(steps) < 10:
        return []
    bound = [r for r in steps if r.clipped]
    share = len(bound) / len(steps)
    if share <= t.clip_bind_fraction:
        return []
    coef = statistics.fmean(
        min(1.0, (r.max_norm or 0) / r.grad_norm) if r.grad_norm > 0 else 1.0 for r in steps
    )
    med = statistics.median(r.grad_norm for r in steps)
    return [
        RULES["GS406"].finding(
            "total-grad-norm",
            f"clipping bound on {len(bound)} of {len(steps)} steps after warm-up "
            f"({share:.0%}); mean clip coefficient {coef:.3g}: clipping is acting as your "
            "learning-rate limiter",
            f"lower the learning rate (by about {coef:.2g}×) or raise max_norm above the "
            f"typical norm ({_fmt(med)})",
            value=share,
            threshold=t.clip_bind_fraction,
            evidence=(
                f"max_norm {_fmt(steps[0].max_norm)}, median norm before clipping {_fmt(med)}",
                f"bound at steps {_steps([r.step for r in bound])}",
            ),
        )
    ]


# -- GS407 / GS408 ---------------------------------------------------------------------
def amp_skips(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = [r for r in _after_warmup(run, t) if r.scale is not None]
    if not steps:
        return []
    skipped = [r.step for r in steps if r.skipped]
    streak = best = 0
    for r in steps:
        streak = streak + 1 if r.skipped else 0
        best = max(best, streak)
    rate = len(skipped) / len(steps)
    if rate <= t.amp_skip_rate and best < t.amp_skip_streak:
        return []
    return [
        RULES["GS407"].finding(
            "grad-scaler",
            f"GradScaler skipped {len(skipped)} of {len(steps)} steps after warm-up "
            f"({rate:.0%}), up to {best} in a row",
            "the gradients overflow fp16 (or are NaN) at most scales: use bf16, lower the "
            "learning rate, or keep the unstable op in fp32",
            value=rate,
            threshold=t.amp_skip_rate,
            evidence=(
                f"skipped steps: {_steps(skipped)}",
                f"loss scale {_fmt(steps[0].scale)} at step {steps[0].step}, "
                f"{_fmt(steps[-1].scale)} at step {steps[-1].step}",
            ),
        )
    ]


def amp_scale(run: WatchRun, t: Thresholds) -> list[Finding]:
    low = [r for r in run.steps if r.scale is not None and r.scale < 1]
    if not low:
        return []
    return [
        RULES["GS408"].finding(
            "grad-scaler",
            f"the loss scale fell below 1 at step {low[0].step} ({_fmt(low[0].scale)}); "
            f"lowest {_fmt(min(r.scale or 0 for r in low))}",
            "the gradients are non-finite at every scale: find the NaN/Inf (GS401, "
            "gradscope inspect --script) instead of letting the scaler shrink",
            value=min(r.scale or 0 for r in low),
            threshold=1.0,
            evidence=(f"{len(low)} steps with scale < 1: {_steps([r.step for r in low])}",),
        )
    ]


# -- GS409 / GS410 / GS411 / GS413 -----------------------------------------------------
def _median_ratios(run: WatchRun, t: Thresholds, with_grad: bool) -> dict[int, float]:
    """Median sampled update/weight ratio per parameter; `with_grad`: only over the
    sampled steps where that parameter had a non-zero gradient."""
    sampled = [r for r in _after_warmup(run, t) if r.update_ratios is not None and not r.skipped]
    out = {}
    for i in range(len(run.params)):
        vals = [
            r.update_ratios[i]
            for r in sampled
            if r.update_ratios is not None
            and (not with_grad or (r.param_norms[i] or 0) > 0)
            and not math.isnan(r.update_ratios[i])
        ]
        if vals:
            out[i] = statistics.median(vals)
    return out


def _got_grad(run: WatchRun, i: int) -> bool:
    return any(
        not r.skipped and r.param_norms[i] is not None and r.param_norms[i] != 0
        for r in run.steps
        if i < len(r.param_norms)
    )


def update_ratio(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Too high: weight matrices only (a bias or norm scale near 0 has a huge ratio
    while healthy). Too low: exactly 0 for any parameter; small only where it had
    gradients (no gradient is GS405/GS413's verdict, not the learning rate's)."""
    out = []
    every = _median_ratios(run, t, with_grad=False)
    graded = _median_ratios(run, t, with_grad=True)
    for i, ratio in every.items():
        p = run.params[i]
        if not p.in_optimizer:
            continue
        matrix = len(p.shape) >= 2
        if p.requires_grad and p.lr != 0:
            if i not in graded:
                continue
            ratio = graded[i]
        if ratio > t.update_ratio_high and matrix:
            out.append(
                RULES["GS409"].finding(
                    p.name,
                    f"each update moves {p.name} by {ratio:.3g} of its norm (median over "
                    "sampled steps); about 1e-3 is healthy",
                    f"lower its param group's learning rate (now {_fmt(p.lr)})",
                    value=ratio,
                    threshold=t.update_ratio_high,
                )
            )
        elif ratio < t.update_ratio_low and (ratio == 0 or matrix):
            if not p.requires_grad:
                why, sev = "it is frozen (requires_grad=False) but in an optimizer", "info"
            elif p.lr == 0:
                why, sev = "its param group's learning rate is 0", ""
            elif not _got_grad(run, i):
                continue  # GS413 says it
            else:
                why, sev = "its learning rate is far too small for its gradients", ""
            finding = RULES["GS410"].finding(
                p.name,
                f"{p.name} is {'not updated' if ratio == 0 else 'barely updated'} "
                f"(update/weight ratio {ratio:.3g}): {why}",
                "give it a learning rate, or remove it from the optimizer if it is meant "
                "to stay fixed",
                value=ratio,
                threshold=t.update_ratio_low,
            )
            if sev:
                from dataclasses import replace

                from gradscope.findings import Severity

                finding = replace(finding, severity=Severity.parse(sev))
            out.append(finding)
    return out


def not_in_optimizer(run: WatchRun, t: Thresholds) -> list[Finding]:
    if not run.optimizers:
        return []
    out = []
    for i, p in enumerate(run.params):
        if p.requires_grad and not p.in_optimizer:
            got = _got_grad(run, i)
            out.append(
                RULES["GS411"].finding(
                    p.name,
                    f"{p.name} requires grad"
                    + (" and gets gradients" if got else "")
                    + " but is in no optimizer param group: it is never updated",
                    "pass model.parameters() (or add a param group for it) to the optimizer",
                    evidence=(f"optimizers: {', '.join(run.optimizers)}",),
                )
            )
    return out


def never_updated(run: WatchRun, t: Thresholds) -> list[Finding]:
    live = _live(run)
    if not live:
        return []
    out = []
    for i, p in enumerate(run.params):
        if not p.requires_grad or not p.in_optimizer or _got_grad(run, i):
            continue
        none = all(i >= len(r.param_norms) or r.param_norms[i] is None for r in live)
        out.append(
            RULES["GS413"].finding(
                p.name,
                f"{p.name} got {'no gradient (None)' if none else 'only zero gradients'} "
                f"in all {len(live)} steps: it never learns",
                "check that it takes part in the loss (`gradscope inspect --script` shows "
                "where the graph is cut)",
            )
        )
    return out


# -- GS412 -----------------------------------------------------------------------------
def grads_not_reset(run: WatchRun, t: Thresholds) -> list[Finding]:
    steps = run.steps[1:]
    if len(steps) < 4:
        return []
    carried = [r for r in steps if r.carried_norm is not None and r.carried_norm > 0]
    share = len(carried) / len(steps)
    if share <= t.not_reset_fraction:
        return []
    calls = statistics.median(r.backward_calls for r in steps)
    how = (
        "optimizer.zero_grad() is missing"
        if calls <= 1
        else f"with {calls:g} backward calls per step (accumulation) the gradients are still "
        "not reset after the step"
    )
    example = carried[len(carried) // 2]
    return [
        RULES["GS412"].finding(
            "gradients",
            f"at {len(carried)} of {len(steps)} steps the previous step's gradients were "
            f"still in .grad when backward ran: {how}",
            "call optimizer.zero_grad() (or model.zero_grad()) once per optimizer step, "
            "after step() or before the first backward",
            value=share,
            threshold=t.not_reset_fraction,
            evidence=(
                f"step {example.step}: carried-over norm {_fmt(example.carried_norm)}, "
                f"norm at the step {_fmt(example.grad_norm)}",
            ),
        )
    ]


CHECKS: list[Callable[[WatchRun, Thresholds], list[Finding]]] = [
    non_finite,
    loss_spike,
    norm_spike,
    exploding_trend,
    vanishing_over_time,
    clipping_binds,
    amp_skips,
    amp_scale,
    update_ratio,
    not_in_optimizer,
    never_updated,
    grads_not_reset,
]
