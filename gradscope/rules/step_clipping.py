"""Verdicts about the script's gradient clipping (GS406, GS416): a clip that binds on most
steps, and one that runs on gradients GradScaler still scales. Each optimizer's steps are
judged on their own. No torch."""

from __future__ import annotations

import statistics
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Mark, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, finite, step_list
from gradscope.steps.records import StepRecord, WatchRun


# -- GS406 / GS416 ---------------------------------------------------------------------
@rule(
    "GS406",
    "clipping-binds",
    Severity.WARNING,
    "clipping",
    Stage.WATCH,
    "watch: gradient clipping bound on most steps",
    example="SGD with max_norm 0.1 where gradients are typically 5",
    fix="lower the learning rate or raise max_norm towards the typical norm; light clipping is "
    "fine when it is meant",
    thresholds=(
        Threshold(
            "clip-bind-fraction",
            0.5,
            "clipping bound (norm above max_norm) on more than this fraction of the steps",
        ),
        Threshold(
            "clip-coef-warn",
            0.5,
            "a mean clip coefficient (max_norm/norm, 1 where it did not bind) below this is a "
            "warning: clipping halves the step or more",
        ),
        Threshold(
            "clip-coef-info",
            0.8,
            "from `clip-coef-warn` up to this: info; at or above it, clipping that binds often is"
            " silent (nanoGPT clips to 0.73-0.87 by design)",
        ),
        Threshold(
            "warmup-steps",
            20,
            "these rules ignore the first this many steps",
        ),
    ),
    objectives=(
        "any: how far clip_grad_norm_ cut the gradient, a mechanism independent of what "
        "the loss means"
    ),
    mark=Mark("clipped", "|"),
    explains=("GS410", "GS415", "GS417"),
)
def clipping_binds(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """After warmup-steps, clip_grad_norm_ bound on more than clip-bind-fraction of the steps.
    How much it bound decides: a mean clip coefficient (max_norm over the norm) below
    clip-coef-warn is a warning; between clip-coef-warn and clip-coef-info, or under an
    optimizer that divides by its gradient scale (Adam and kin), it is information; at or above
    clip-coef-info, nothing. A max_norm of 0 at every step is an error: the clip scales
    every gradient to 0 and no step moves a weight (max_norm=0 does not turn clipping off)."""
    # How much clipping binds, not only how often: stock configs trim ~12% of most steps by
    # design (info at most); a mean clip coefficient below clip-coef-warn is a warning. Steps
    # clipped on scaled gradients are GS416's (their coefficient means nothing).
    out = []
    for s in by_optimizer(run):
        steps = [
            r
            for r in s.steps
            if r.step > t.warmup_steps
            and r.max_norm is not None
            and not r.skipped
            and not r.scaled_clip
        ]
        if len(steps) < 10:
            continue
        bound = [r for r in steps if r.clipped]
        share = len(bound) / len(steps)
        if share <= t.clip_bind_fraction:
            continue
        coef = statistics.fmean(_clip_coefficient(r) for r in steps)
        if coef >= t.clip_coef_info:
            continue
        med = statistics.median(r.grad_norm for r in steps)
        why, advice, severity, threshold = _how_much(run, s, coef, med, t)
        head = (
            f"clipping bound on {len(bound)} of {len(steps)} steps after warm-up ({share:.0%}); "
            f"mean clip coefficient {coef:.3g}"
        )
        evidence = (
            f"max_norm {num(steps[0].max_norm)}, median norm before clipping {num(med)}",
            f"bound at steps {step_list([r.step for r in bound])}",
        )
        finding = this.finding(
            s.subject("total-grad-norm"),
            s.say(f"{head}: {why}"),
            advice,
            value=coef,
            threshold=threshold,
            evidence=evidence,
        )
        out.append(about(replace(finding, severity=severity), (r.step for r in bound)))
    return out


def _how_much(
    run: WatchRun, s: Series, coef: float, med: float, t: Thresholds
) -> tuple[str, str, Severity, float]:
    """(why, advice, severity, threshold) for a clip whose mean coefficient is coef and the
    typical norm med: light trimming and clipping under an adaptive optimizer are
    information, a clip that sets the step size is a warning. Under Adam and kin a clip
    that binds at most steps trims no step: the running scale the step is divided by is
    made of the clipped gradients too, so the adaptive wording holds at any coefficient."""
    if coef == 0.0:  # max_norm 0 at every step: any optimizer steps zeros
        return *zeroed(med), Severity.ERROR, t.clip_coef_warn
    light = coef >= t.clip_coef_warn
    if _adaptive(run, s.index):  # Adam & co. divide the clip's scale back out
        why = (
            f"{run.optimizers[s.index]} divides each step by its running gradient scale, "
            "so a clip that scales every step alike changes little; it tames the outliers"
        )
        advice = "fine if meant (minGPT and nanoGPT clip this way); the learning rate, not "
        advice += f"max_norm, sets this optimizer's step size (typical norm {num(med)})"
        return why, advice, Severity.INFO, t.clip_coef_info if light else t.clip_coef_warn
    if light:  # trims a good share: worth knowing, not a problem
        why = f"clipping trims about {1 - coef:.0%} off the typical step"
        advice = "fine if meant (many stock configs clip this lightly); else raise max_norm "
        advice += f"towards the typical norm ({num(med)})"
        return why, advice, Severity.INFO, t.clip_coef_info
    why = "clipping is acting as your learning-rate limiter"
    advice = f"lower the learning rate (by about {coef:.2g}×) or raise max_norm above "
    advice += f"the typical norm ({num(med)})"
    return why, advice, Severity.WARNING, t.clip_coef_warn


def zeroed(med: float) -> tuple[str, str]:
    """(why, advice) for a clip to max_norm 0: it multiplies every gradient by
    max_norm / (norm + 1e-6), so every gradient becomes 0 before the step."""
    why = (
        "max_norm is 0, so clip_grad_norm_ multiplies every gradient by 0 before the step: "
        f"no step moves a weight (the gradients before the clip: median norm {num(med)})"
    )
    advice = (
        "max_norm=0 does not turn clipping off: drop the clip, or give it a positive "
        "max_norm (skorch's GradientNormClipping is off with gradient_clip_value=None)"
    )
    return why, advice


ADAPTIVE = ("adam", "rmsprop", "adagrad", "adadelta", "adafactor", "lion", "lamb", "sophia")
"""Optimizers that divide each step by a running gradient scale (or take its sign): a
clip that scales every step by about the same factor is largely cancelled."""


def _adaptive(run: WatchRun, index: int) -> bool:
    kind = run.optimizers[index].lower() if index < len(run.optimizers) else ""
    return any(name in kind for name in ADAPTIVE)


def _clip_coefficient(r: StepRecord) -> float:
    """max_norm over the norm the clip compared (the script's own total, in its norm type;
    the L2 norm when it is not known); 1 where it did not bind."""
    total = r.clip_total if r.clip_total is not None else r.grad_norm
    if not total > 0 or r.max_norm is None:
        return 1.0
    return min(1.0, r.max_norm / total)


@rule(
    "GS416",
    "clip-before-unscale",
    Severity.ERROR,
    "clip-scaled",
    Stage.WATCH,
    "watch: gradients were clipped while still scaled by GradScaler (no unscale_ first), so "
    "max_norm is compared with norms thousands of times too large",
    example="scaler.scale(loss).backward(); clip_grad_norm_(...); scaler.step(opt)",
    fix="call scaler.unscale_(optimizer) after the backward and before clip_grad_norm_, then "
    "scaler.step(optimizer)",
    objectives=(
        "any: the order of GradScaler's unscale_ and the clip, a mechanism independent of "
        "what the loss means"
    ),
    explains=("GS406", "GS415"),
)
def clip_before_unscale(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """clip_grad_norm_ ran on gradients still multiplied by GradScaler's scale (no
    scaler.unscale_ before it), so max_norm is compared with norms thousands of times too large
    and clipping cuts every update to about max_norm/scale."""
    out = []
    for s in by_optimizer(run):
        bad = [r for r in s.steps if r.scaled_clip]
        if not bad:
            continue
        r = next((x for x in bad if finite(x.grad_norm) and x.max_norm is not None), bad[0])
        scale = r.scale or 0.0
        scaled = r.grad_norm * scale if scale else None
        evidence = [
            f"scaled clip at steps {step_list([x.step for x in bad])} "
            f"({len(bad)} of {len(s.steps)})",
            f"step {r.step}: loss scale {num(r.scale)}, unscaled norm {num(r.grad_norm)}"
            + (f" (as clipped: {num(scaled)})" if scaled is not None else "")
            + f" against max_norm {num(r.max_norm)}",
        ]
        finding = this.finding(
            s.subject("grad-scaler"),
            s.say(
                f"clip_grad_norm_ ran on gradients still multiplied by GradScaler's scale "
                f"(no unscale_ first) at {len(bad)} step(s), from step {bad[0].step}: "
                f"max_norm {num(r.max_norm)} was compared with norms {num(r.scale)}× too "
                "large, so clipping cuts every update to a norm of about max_norm/scale "
                "instead of bounding it"
            ),
            "call scaler.unscale_(optimizer) after scaler.scale(loss).backward() and "
            "before torch.nn.utils.clip_grad_norm_(...), then scaler.step(optimizer)",
            value=float(len(bad)),
            evidence=tuple(evidence),
        )
        out.append(about(finding, (x.step for x in bad)))
    return out
