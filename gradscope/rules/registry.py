"""Findings from RunStats: the troubleshooting table as pure functions (no torch).

Each rule is a small function `(stats, thresholds) -> list[Finding]` registered
with its stable id; `diagnose` runs them all and applies severity overrides and
ignores from the settings.
"""

from __future__ import annotations

import fnmatch
import statistics
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from gradscope.config import Settings, Thresholds
from gradscope.types import Finding, ParamStats, RunStats, Severity, TableRow, human_bytes

TABLE = {row.key: row for row in (
    TableRow("none-grad", "grad is None", "requires_grad not set / tensor not in the graph",
             "check every tensor that takes part in the computation"),
    TableRow("exploding", "exploding gradients", "learning rate too high / network too deep",
             "gradient clipping / normalization"),
    TableRow("vanishing", "vanishing gradients", "saturating activations",
             "ReLU / LeakyReLU (and residuals, normalization)"),
    TableRow("oom", "out of memory", "graph not released",
             "no_grad / detach (and .item() for logged losses, checkpointing)"),
    # the tutorial's table of gradient-checking techniques (2.3): gradcheck row
    TableRow("gradcheck", "custom Function's gradient is wrong",
             "backward does not compute the derivative of forward",
             "verify it with torch.autograd.gradcheck (gradscope gradcheck)"),
)}


@dataclass(frozen=True)
class Rule:
    id: str
    slug: str
    severity: Severity
    row: str
    summary: str
    check: Callable[[RunStats, Thresholds], list[Finding]]

    def finding(self, subject: str, message: str, advice: str, value: float | None = None,
                threshold: float | None = None, evidence: tuple[str, ...] = ()) -> Finding:
        return Finding(self.id, self.slug, self.severity, subject, message, advice,
                       TABLE[self.row], value, threshold, evidence)


RULES: dict[str, Rule] = {}


def rule(id: str, slug: str, severity: Severity, row: str, summary: str):
    def register(check: Callable[[RunStats, Thresholds], list[Finding]]):
        RULES[id] = Rule(id, slug, severity, row, summary, check)
        return check
    return register


def _r(id: str) -> Rule:
    return RULES[id]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _trainable(stats: RunStats) -> list[ParamStats]:
    return [p for p in stats.params if p.requires_grad]


def _live(stats: RunStats) -> list[ParamStats]:
    """Parameters with a finite, non-zero gradient: the ones norms can be compared over."""
    return [p for p in stats.params if p.has_grad and p.finite and p.grad_max]


def dense_rms(p: ParamStats) -> float:
    """RMS over the non-zero elements, so sparse (embedding) gradients compare fairly."""
    nonzero = p.numel * (1.0 - (p.zero_fraction or 0.0))
    return (p.grad_norm or 0.0) / max(nonzero, 1.0) ** 0.5


@rule("GS101", "none-grad", Severity.ERROR, "none-grad",
      "a parameter with requires_grad=True got no gradient")
def none_grad(stats: RunStats, t: Thresholds) -> list[Finding]:
    ran = {m.name for m in stats.modules if m.ran}
    out = []
    for p in _trainable(stats):
        if p.has_grad:
            continue
        if not stats.loss_requires_grad:
            why = "the loss itself does not require grad, so no parameter is in its graph"
            advice = ("look for torch.no_grad(), .detach(), .item() or a numpy round-trip "
                      "before the loss is computed")
        elif p.module not in ran:
            why = f"its module `{p.module or '<root>'}` never ran in the forward pass"
            advice = ("call the module in forward, delete it, or freeze it with "
                      "requires_grad_(False) if it is unused on purpose")
        else:
            why = (f"its module `{p.module or '<root>'}` ran, but its output does not reach "
                   "the loss: the graph is cut after it")
            advice = ("find the .detach(), .data, torch.no_grad() or non-torch round-trip "
                      "between the module and the loss")
        out.append(_r("GS101").finding(p.name, f"grad of {p.name} is None: {why}", advice))
    return out


@rule("GS102", "non-finite-loss", Severity.ERROR, "exploding",
      "the loss is NaN or infinite")
def non_finite_loss(stats: RunStats, t: Thresholds) -> list[Finding]:
    if stats.loss_finite:
        return []
    return [_r("GS102").finding(
        "loss", f"the loss ({stats.loss_source}) is {_fmt(stats.loss_value)}",
        "find the op that first produces a non-finite value (log/sqrt/div of zero, overflow in "
        "float16) and guard it with a clamp or an epsilon", stats.loss_value)]


@rule("GS103", "non-finite-grad", Severity.ERROR, "exploding",
      "a gradient holds NaN or Inf")
def non_finite_grad(stats: RunStats, t: Thresholds) -> list[Finding]:
    where = "the loss is non-finite too" if not stats.loss_finite else "although the loss is finite"
    return [_r("GS103").finding(
        p.name, f"grad of {p.name} holds NaN/Inf (max |grad| = {_fmt(p.grad_max)}); {where}",
        "a backward formula divides by zero or overflows (sqrt/log/pow near 0, x/x, masked "
        "infinities); guard the forward op or clip gradients", p.grad_max)
        for p in stats.params if p.has_grad and not p.finite]


@rule("GS104", "exploding", Severity.ERROR, "exploding",
      "a gradient norm is above the absolute threshold or far above the model's median")
def exploding(stats: RunStats, t: Thresholds) -> list[Finding]:
    live = _live(stats)
    median = statistics.median(dense_rms(p) for p in live) if live else 0.0
    out = []
    for p in live:
        norm = p.grad_norm or 0.0
        ratio = dense_rms(p) / median if median else 0.0
        if norm > t.explode_norm:
            msg = f"grad norm of {p.name} is {_fmt(norm)} > explode-norm {_fmt(t.explode_norm)}"
            value, threshold = norm, t.explode_norm
        elif ratio > t.explode_median_ratio and norm > t.explode_min_norm:
            msg = (f"grad RMS of {p.name} is {_fmt(ratio)}x the model's median > "
                   f"explode-median-ratio {_fmt(t.explode_median_ratio)}")
            value, threshold = ratio, t.explode_median_ratio
        else:
            continue
        out.append(_r("GS104").finding(
            p.name, msg, "clip gradients (torch.nn.utils.clip_grad_norm_), lower the learning "
            "rate, or normalise activations (LayerNorm/BatchNorm) and check the weight init",
            value, threshold))
    return out


def _module_rms(params: Iterable[ParamStats]) -> float:
    params = list(params)
    sq = sum((p.grad_norm or 0.0) ** 2 for p in params)
    n = sum(p.numel * (1.0 - (p.zero_fraction or 0.0)) for p in params)
    return (sq / max(n, 1.0)) ** 0.5


@rule("GS105", "vanishing", Severity.WARNING, "vanishing",
      "a gradient norm is tiny, or the first layer's gradients are far smaller than the last's")
def vanishing(stats: RunStats, t: Thresholds) -> list[Finding]:
    live = _live(stats)
    out = [_r("GS105").finding(
        p.name, f"grad norm of {p.name} is {_fmt(p.grad_norm)} < vanish-norm "
        f"{_fmt(t.vanish_norm)}", "the gradient barely reaches this parameter: replace "
        "saturating activations (sigmoid/tanh) with ReLU/GELU, add residual connections or "
        "normalisation", p.grad_norm, t.vanish_norm)
        for p in live if (p.grad_norm or 0.0) < t.vanish_norm]
    by_depth = sorted((p for p in live if p.depth is not None), key=lambda p: p.depth or 0)
    if len({p.depth for p in by_depth}) < 2:
        return out
    first_depth, last_depth = by_depth[0].depth, by_depth[-1].depth
    first = [p for p in by_depth if p.depth == first_depth]
    last = [p for p in by_depth if p.depth == last_depth]
    last_rms = _module_rms(last)
    ratio = _module_rms(first) / last_rms if last_rms else 0.0
    if ratio < t.vanish_depth_ratio and first[0].name not in {f.subject for f in out}:
        out.append(_r("GS105").finding(
            first[0].module or first[0].name,
            f"grad RMS of the first layer run (`{first[0].module}`) is {_fmt(ratio)}x that of "
            f"the last (`{last[0].module}`) < vanish-depth-ratio {_fmt(t.vanish_depth_ratio)}",
            "the gradient shrinks layer by layer on its way back: use ReLU/GELU instead of "
            "sigmoid/tanh, residual connections, normalisation, or a better init",
            ratio, t.vanish_depth_ratio))
    return out


@rule("GS106", "zero-grad", Severity.WARNING, "vanishing",
      "a gradient exists but every element is exactly zero")
def zero_grad(stats: RunStats, t: Thresholds) -> list[Finding]:
    return [_r("GS106").finding(
        p.name, f"grad of {p.name} is all zeros ({p.numel} elements)",
        "the parameter is in the graph but nothing flows back: look for dead ReLUs (large "
        "negative bias), a multiplication by zero or a mask that is always off", 0.0)
        for p in stats.params if p.has_grad and p.grad_max == 0 and p.numel > 0]


@rule("GS107", "frozen", Severity.INFO, "none-grad",
      "parameters with requires_grad=False (counted per module)")
def frozen(stats: RunStats, t: Thresholds) -> list[Finding]:
    groups: dict[str, list[ParamStats]] = {}
    for p in stats.params:
        if not p.requires_grad:
            groups.setdefault(p.module.partition(".")[0] or p.name, []).append(p)
    return [_r("GS107").finding(
        top, f"{len(ps)} frozen parameter tensors ({sum(p.numel for p in ps):,} elements) "
        f"under `{top}`", "expected for fine-tuning; if not, call requires_grad_(True) on them",
        float(len(ps))) for top, ps in groups.items()]


def _from_gradcheck(stats: RunStats, t: Thresholds) -> list[Finding]:
    return []  # produced by gradscope.gradcheck.findings from a gradcheck result


rule("GS201", "jacobian-mismatch", Severity.ERROR, "gradcheck",
     "a custom Function's analytical gradient differs from the numerical one")(_from_gradcheck)
rule("GS202", "function-raised", Severity.ERROR, "gradcheck",
     "a checked Function's forward, backward or jvp raised")(_from_gradcheck)
rule("GS203", "gradcheck-warning", Severity.WARNING, "gradcheck",
     "a gradcheck caveat: low precision, in-place changes, outputs without grad")(
         _from_gradcheck)


@rule("GS301", "graph-retained", Severity.WARNING, "oom",
      "a module attribute keeps a tensor with a grad_fn, and so the step's graph, alive")
def graph_retained(stats: RunStats, t: Thresholds) -> list[Finding]:
    return [_r("GS301").finding(
        attr, f"`{attr}` still holds a tensor with a grad_fn after backward: the whole graph "
        f"of the step ({human_bytes(stats.saved_bytes)} of saved activations) stays in "
        "memory, and grows if it accumulates across steps",
        "store `.detach()` (or `.item()` for logged numbers) instead of the live tensor")
        for attr in stats.retained]


@rule("GS110", "norm-change", Severity.ERROR, "exploding",
      "with --baseline: a gradient norm grew or shrank by more than baseline-factor")
def norm_change(stats: RunStats, t: Thresholds) -> list[Finding]:
    return []  # needs the baseline: produced by gradscope.baseline.compare


def diagnose(stats: RunStats, settings: Settings | None = None) -> list[Finding]:
    settings = settings or Settings()
    findings = []
    for r in RULES.values():
        findings.extend(r.check(stats, settings.thresholds))
    return apply_settings(findings, settings)


def apply_settings(findings: list[Finding], settings: Settings) -> list[Finding]:
    """Severity overrides by id or slug, then drop ignored (rule, subject-glob) pairs."""
    out = []
    for f in findings:
        if any(rule in (f.rule, f.slug) and fnmatch.fnmatchcase(f.subject, glob)
               for rule, glob in settings.ignores):
            continue
        sev = settings.severities.get(f.rule) or settings.severities.get(f.slug)
        out.append(replace(f, severity=sev) if sev is not None else f)
    return out


def lookup(rule_or_slug: str) -> Rule | None:
    return RULES.get(rule_or_slug.upper()) or next(
        (r for r in RULES.values() if r.slug == rule_or_slug), None)
